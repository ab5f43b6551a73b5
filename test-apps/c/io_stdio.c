/* glibc's own I/O on descriptors the program made: stdio on fdopen'ed pipes and
 * sockets, dprintf into a full pipe, sendfile into a socket with a slow reader. glibc
 * reaches the kernel through internal calls here, so the library must not have changed
 * the descriptors' blocking mode behind the program's back. Deterministic stdout. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

static int p[2], q[2], sv[2];

static void *slow_line_writer(void *a) {
    (void)a;
    for (int i = 0; i < 20; i++) { usleep(2000); CHECK(dprintf(p[1], "line %d\n", i) > 0); }
    close(p[1]);
    return 0;
}
static void *slow_drain(void *a) {
    int fd = (int)(long)a; char buf[4096]; long total = 0; ssize_t n;
    usleep(20000);
    while ((n = read(fd, buf, sizeof buf)) > 0) { total += n; if (total % 65536 < 4096) usleep(1000); }
    return (void *)total;
}

static void *line_reader(void *a) {
    (void)a; FILE *f = fdopen(p[0], "r"); CHECK(f); char line[64]; long n = 0;
    while (fgets(line, sizeof line, f)) n++;
    CHECK(!ferror(f)); fclose(f); return (void *)n;
}
static void *dprintf_writer(void *a) {
    (void)a; long sent = 0;
    for (int i = 0; i < 4000; i++) { int k = dprintf(q[1], "%0100d\n", i); CHECK(k == 101); sent += k; }
    close(q[1]); return (void *)sent;
}
/* The file to send is passed as the argument (a nested function used to read it from
 * main's frame, which needed an executable stack for its trampoline). */
static void *file_sender(void *a) {
    int f = (int)(long)a; off_t off = 0; long total = 0;
    while (total < 256 * 4096) { ssize_t k = sendfile(sv[0], f, &off, 256 * 4096 - total); CHECK(k > 0); total += k; }
    close(sv[0]); return (void *)total;
}

int main(void) {
    /* fgets on an fdopen'ed pipe fed slowly: every line, no early EOF. */
    CHECK(pipe(p) == 0);
    pthread_t w; pthread_create(&w, 0, slow_line_writer, 0);
    pthread_t r; void *lines; pthread_create(&r, 0, line_reader, 0);
    pthread_join(w, 0); pthread_join(r, &lines);
    printf("fdopen_fgets lines=%ld\n", (long)lines);

    /* dprintf far more than a pipe holds, with a slow reader: nothing lost. */
    CHECK(pipe(q) == 0);
    pthread_t d; pthread_create(&d, 0, slow_drain, (void *)(long)q[0]);
    pthread_t wr; void *sent, *got; pthread_create(&wr, 0, dprintf_writer, 0);
    pthread_join(wr, &sent); pthread_join(d, &got);
    printf("dprintf sent=%ld received=%ld\n", (long)sent, (long)got);

    /* sendfile from a file into a socket whose reader is slow. */
    char path[] = "/tmp/fiberize-io-stdio-XXXXXX"; int f = mkstemp(path); CHECK(f >= 0); unlink(path);
    char block[4096]; memset(block, 'x', sizeof block);
    for (int i = 0; i < 256; i++) CHECK(write(f, block, sizeof block) == (ssize_t)sizeof block);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    pthread_t s; pthread_create(&s, 0, slow_drain, (void *)(long)sv[1]);
    pthread_t sf; void *sfs, *sfr; pthread_create(&sf, 0, file_sender, (void *)(long)f);
    pthread_join(sf, &sfs); pthread_join(s, &sfr);
    printf("sendfile sent=%ld received=%ld\n", (long)sfs, (long)sfr);
    close(f);

    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
