/* The TPC-C client's random input (clause 2.1.6 and 4.3.2: NURand, a- and n-strings,
 * customer last names) and its clock: shared by load.c, run.c and check.c. */
#define _GNU_SOURCE
#include "tpcc.h"

#include <time.h>

void rng_seed(struct rng *r, uint64_t seed) {
    r->state = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    if (!r->state) r->state = 1;
}

uint64_t rng_next(struct rng *r) { /* xorshift64* */
    r->state ^= r->state >> 12;
    r->state ^= r->state << 25;
    r->state ^= r->state >> 27;
    return r->state * 0x2545F4914F6CDD1Dull;
}

int rand_int(struct rng *r, int lo, int hi) {
    return lo + (int)((rng_next(r) >> 11) % (uint64_t)(hi - lo + 1));
}

int nurand(struct rng *r, int a, int x, int y) {
    int c = a == 255 ? C_LAST_RUN : a == 1023 ? C_ID : C_OL_I_ID;
    return (((rand_int(r, 0, a) | rand_int(r, x, y)) + c) % (y - x + 1)) + x;
}

int rand_astring(struct rng *r, char *out, int lo, int hi) {
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    int n = rand_int(r, lo, hi);
    for (int i = 0; i < n; i++) out[i] = alnum[rand_int(r, 0, 61)];
    out[n] = 0;
    return n;
}

int rand_nstring(struct rng *r, char *out, int lo, int hi) {
    int n = rand_int(r, lo, hi);
    for (int i = 0; i < n; i++) out[i] = (char)('0' + rand_int(r, 0, 9));
    out[n] = 0;
    return n;
}

void last_name(int num, char *out) {
    static const char *syllables[] = {"BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"};
    snprintf(out, 16, "%s%s%s", syllables[num / 100], syllables[num / 10 % 10], syllables[num % 10]);
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
