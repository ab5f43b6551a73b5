/* What a cold stack line costs a resumed fiber, and what backing every fiber's dead
 * stack with the same physical pages would save (a measurement, not a test).
 *
 *   stack_alias PRIVATE|ALIAS N
 *
 * N "stacks" of 32 KiB each, visited round robin as a worker visits its fibers: each
 * visit writes two words into every 64-byte line of the stack in a scattered order (a
 * fixed permutation of the lines, so the prefetcher cannot stream them), as a query's
 * deep frames are written after its fiber resumes.
 *   PRIVATE: each stack has pages of its own (what fibers have today).
 *   ALIAS:   every stack maps the same memfd pages at its own address (the shared
 *            dead-stack design): N distinct virtual ranges, 32 KiB of physical memory.
 * Prints "mode=... n=... ns_per_line=...".
 *
 * Run it under `valgrind --tool=cachegrind --cache-sim=yes --LL=524288,8,64` too: the
 * simulator indexes its caches by virtual address, so ALIAS misses as often as PRIVATE
 * there, whatever the hardware does. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

enum { STACK_BYTES = 32768, LINE = 64, LINES = STACK_BYTES / LINE, WRITES_PER_RUN = 20000000 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "PRIVATE") && strcmp(argv[1], "ALIAS")) || atoi(argv[2]) < 1) {
        fprintf(stderr, "usage: %s PRIVATE|ALIAS N\n", argv[0]);
        return 2;
    }
    int alias = !strcmp(argv[1], "ALIAS"), n = atoi(argv[2]);
    int fd = memfd_create("stack_alias", 0);
    if (fd < 0 || ftruncate(fd, STACK_BYTES)) { perror("memfd"); return 1; }
    volatile char **stack = malloc(n * sizeof *stack);
    for (int i = 0; i < n; i++) {
        void *m = alias ? mmap(0, STACK_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                        : mmap(0, STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) { perror("mmap"); return 1; }
        stack[i] = m;
    }
    int order[LINES];
    for (int l = 0; l < LINES; l++) order[l] = (l * 197) % LINES; /* 197 is prime to 512 */
    for (int i = 0; i < n; i++)                                   /* fault every page in */
        for (int l = 0; l < LINES; l++) stack[i][l * LINE] = 1;
    long rounds = WRITES_PER_RUN / ((long)n * LINES) + 1;
    double t0 = now();
    for (long r = 0; r < rounds; r++)
        for (int i = 0; i < n; i++)
            for (int l = 0; l < LINES; l++) {
                stack[i][order[l] * LINE + 8] = (char)r;
                stack[i][order[l] * LINE + 16] = (char)r;
            }
    double t = now() - t0;
    printf("mode=%s n=%d ns_per_line=%.2f\n", argv[1], n, t * 1e9 / ((double)rounds * n * LINES));
    return 0;
}
