/* The 16-byte request/reply exchange of io_peer_cpu.c and io_harvest.c: a request
 * carries an int, its reply the int plus one. Failures exit the program. */
#ifndef FIBERIZE_TEST_REQUEST_REPLY_H
#define FIBERIZE_TEST_REQUEST_REPLY_H
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REQUEST_BYTES 16

/* Reads or writes all `n` bytes. */
__attribute__((unused)) static void full(int fd, char *buf, size_t n, int writing) {
    size_t done = 0;
    while (done < n) {
        ssize_t k = writing ? write(fd, buf + done, n - done) : read(fd, buf + done, n - done);
        if (k <= 0) {
            fprintf(stderr, "%s failed (errno %d)\n", writing ? "write" : "read", errno);
            exit(1);
        }
        done += (size_t)k;
    }
}

/* Replies to each request on `fd` until the peer closes it, then closes it; how many
 * requests it served. */
__attribute__((unused)) static long reply_until_closed(int fd) {
    long served = 0;
    char buf[REQUEST_BYTES];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n == 0) break;
        if (n < 0) {
            fprintf(stderr, "read failed (errno %d)\n", errno);
            exit(1);
        }
        if (n < (ssize_t)sizeof buf) full(fd, buf + n, sizeof buf - (size_t)n, 0);
        int i;
        memcpy(&i, buf, sizeof i);
        i++;
        memcpy(buf, &i, sizeof i);
        full(fd, buf, sizeof buf, 1);
        served++;
    }
    close(fd);
    return served;
}
#endif
