/* Threads that still run and wait on pipes: bytes passed both ways between two threads
 * over two pipes (the library's epoll sets and eventfds at work), with short sleeps.
 * For the io_* programs that first do something to the library's descriptors. */
#include <pthread.h>
#include <unistd.h>

/* p[0]: read end from the other side, p[3]: write end back; `rounds` bytes echoed. */
struct pong_args { int p[4]; int rounds; };

__attribute__((unused)) static void *pong_thread(void *a) {
    struct pong_args *pa = a;
    char c;
    for (int i = 0; i < pa->rounds; i++) {
        if (read(pa->p[0], &c, 1) != 1 || write(pa->p[3], &c, 1) != 1) return (void *)1;
        if (i % 8 == 0) usleep(500);
    }
    return 0;
}

/* `rounds` bytes sent and echoed back; the count that came back right, or -1 if the
 * pipes or the thread could not be made. */
__attribute__((unused)) static int ping_pong_rounds(int rounds) {
    struct pong_args pa = { { -1, -1, -1, -1 }, rounds };
    if (pipe(pa.p) != 0 || pipe(pa.p + 2) != 0) return -1;
    pthread_t t;
    if (pthread_create(&t, 0, pong_thread, &pa) != 0) return -1;
    int ok = 0;
    for (int i = 0; i < rounds; i++) {
        char c = 'a' + i % 26, d = 0;
        if (write(pa.p[1], &c, 1) != 1) break;
        ok += read(pa.p[2], &d, 1) == 1 && d == c;
        if (i % 10 == 0) usleep(1000);
    }
    void *r;
    if (pthread_join(t, &r) != 0 || r != 0) ok = -1;
    for (int i = 0; i < 4; i++) close(pa.p[i]);
    return ok;
}

__attribute__((unused)) static void *sleeper_thread(void *a) {
    for (int i = 0; i < 5; i++) usleep(2000);
    return a;
}
