/* Benchmark (not a test): thread-per-connection TCP echo server on loopback with N
 * client threads each doing M request/response round trips of 32 bytes.
 * usage: bench_echo CONNECTIONS MESSAGES; prints msgs_per_sec=X on stdout. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <time.h>
int port; int NC, NM;
void *conn(void *a) { int fd = (long)a; char buf[256]; for (;;) { ssize_t n = read(fd, buf, sizeof buf); if (n <= 0) break; write(fd, buf, n); } close(fd); return 0; }
void *acceptor(void *a) { int ls = (long)a; for (int i = 0; i < NC; i++) { int fd = accept(ls, 0, 0); if (fd < 0) { perror("accept"); exit(1); } pthread_t t; pthread_create(&t, 0, conn, (void*)(long)fd); pthread_detach(t); } return 0; }
long total;
void *client(void *a) { int fd = socket(AF_INET, SOCK_STREAM, 0); struct sockaddr_in sa = {0}; sa.sin_family = AF_INET; sa.sin_port = htons(port); sa.sin_addr.s_addr = htonl(0x7f000001);
  if (connect(fd, (void*)&sa, sizeof sa)) { perror("connect"); exit(1); } int one = 1; setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char msg[64] = "hello world 0123456789", buf[64]; long ok = 0;
  for (int i = 0; i < NM; i++) { if (write(fd, msg, 32) != 32) exit(2); int got = 0; while (got < 32) { ssize_t n = read(fd, buf + got, 32 - got); if (n <= 0) exit(3); got += n; } if (!memcmp(buf, msg, 32)) ok++; }
  close(fd); __atomic_add_fetch(&total, ok, __ATOMIC_SEQ_CST); return 0; }
int main(int argc, char **argv) { NC = atoi(argv[1]); NM = atoi(argv[2]);
  int ls = socket(AF_INET, SOCK_STREAM, 0); int one = 1; setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa = {0}; sa.sin_family = AF_INET; sa.sin_addr.s_addr = htonl(0x7f000001); bind(ls, (void*)&sa, sizeof sa); listen(ls, 4096);
  socklen_t l = sizeof sa; getsockname(ls, (void*)&sa, &l); port = ntohs(sa.sin_port);
  struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
  pthread_t at; pthread_create(&at, 0, acceptor, (void*)(long)ls);
  pthread_t *c = malloc(sizeof(pthread_t) * NC); for (int i = 0; i < NC; i++) pthread_create(&c[i], 0, client, 0);
  for (int i = 0; i < NC; i++) pthread_join(c[i], 0); pthread_join(at, 0);
  clock_gettime(CLOCK_MONOTONIC, &t1); double s = t1.tv_sec - t0.tv_sec + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  if (total != (long)NC * NM) { fprintf(stderr, "lost messages\n"); return 1; }
  printf("msgs_per_sec=%.0f\n", total / s); }
