/* Loopback TCP for the benchmark programs (bench_echo.c, bench_request.c): a listening
 * socket on 127.0.0.1 with an ephemeral port (backlog 4096), and a connection to it
 * with TCP_NODELAY. Both exit the program on failure. */
#ifndef FIBERIZE_TEST_LOOPBACK_H
#define FIBERIZE_TEST_LOOPBACK_H
#include <stdio.h>
#include <stdlib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

static int listen_loopback(int *port) {
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (bind(ls, (void *)&sa, sizeof sa) || listen(ls, 4096) || getsockname(ls, (void *)&sa, &len)) {
        perror("listen");
        exit(1);
    }
    *port = ntohs(sa.sin_port);
    return ls;
}

static int connect_loopback(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (void *)&sa, sizeof sa)) {
        perror("connect");
        exit(1);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}
#endif
