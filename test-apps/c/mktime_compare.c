/* mktime_compare: checks fiberize's mktime/localtime/ctime/tzset exports (issue 4)
 * against glibc's, for the zone given by TZ in the environment.
 *
 *   mktime_compare summary [N]  run mktime over N random inputs plus the edge cases of
 *                               this zone (DST transitions found by scanning
 *                               1800..2100), print one summary line: a hash of every
 *                               result and counts per outcome. Run natively and
 *                               preloaded, the outputs must be byte-identical.
 *   mktime_compare lines [N]    same inputs, one line per input (to find the first
 *                               difference when the summaries differ).
 *   mktime_compare inproc [N]   in one process, in a pthread (a fiber under the
 *                               preload): for every input call `mktime` (our export
 *                               when preloaded) and glibc's own mktime (dlopen of
 *                               libc.so.6 + dlsym), and compare result, errno, the
 *                               normalized struct tm (tm_zone pointer included) and
 *                               tzname/timezone/daylight; likewise timelocal, localtime
 *                               and ctime on a subset. Then 4 threads check
 *                               mktime(localtime_r(t)) == t concurrently. Prints the
 *                               number of differences and the first ones.
 *   mktime_compare pickup       setenv/putenv/unsetenv of TZ between calls, with and
 *                               without tzset(): deterministic lines to compare native
 *                               vs preloaded.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef time_t (*mktime_fn)(struct tm *);
typedef struct tm *(*localtime_fn)(const time_t *);
typedef char *(*ctime_fn)(const time_t *);

/* ------------------------------------------------------------------ inputs */

static uint64_t rng_state;
static uint64_t rnd(void) {
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}
static int rnd_range(int lo, int hi) { /* inclusive */
    return lo + (int)(rnd() % (uint64_t)((int64_t)hi - lo + 1));
}
static int rnd_int(void) { return (int)(uint32_t)rnd(); }

struct input {
    int year, mon, mday, hour, min, sec, isdst;
};

static struct input *inputs;
static size_t n_inputs, cap_inputs, n_edges;

static void push(struct input in) {
    if (n_inputs == cap_inputs) {
        cap_inputs = cap_inputs ? cap_inputs * 2 : 65536;
        inputs = realloc(inputs, cap_inputs * sizeof *inputs);
        if (!inputs) { perror("realloc"); exit(2); }
    }
    inputs[n_inputs++] = in;
}

/* Wall-clock seconds `w` (local time read as if it were UTC) as an input. */
static void push_wall(int64_t w, int isdst) {
    time_t tw = (time_t)w;
    struct tm g;
    if (!gmtime_r(&tw, &g)) return;
    struct input in = { g.tm_year, g.tm_mon, g.tm_mday, g.tm_hour, g.tm_min, g.tm_sec, isdst };
    push(in);
}

static int same_zone(const struct tm *a, const struct tm *b) {
    return a->tm_gmtoff == b->tm_gmtoff && a->tm_isdst == b->tm_isdst;
}

/* Finds the offset changes of the loaded zone between 1800 and 2100 (daily scan,
 * bisected to the second) and adds wall times around each one, for every tm_isdst. */
static size_t add_transition_edges(void) {
    const int64_t start = -5364662400LL, end = 4102444800LL, step = 86400;
    size_t transitions = 0;
    struct tm prev, cur;
    time_t t = (time_t)start;
    localtime_r(&t, &prev);
    for (int64_t s = start + step; s <= end && transitions < 3000; s += step) {
        t = (time_t)s;
        localtime_r(&t, &cur);
        if (same_zone(&prev, &cur)) { prev = cur; continue; }
        int64_t lo = s - step, hi = s; /* zone(lo) == prev, zone(hi) != prev */
        while (hi - lo > 1) {
            int64_t mid = lo + (hi - lo) / 2;
            struct tm m;
            t = (time_t)mid;
            localtime_r(&t, &m);
            if (same_zone(&prev, &m)) lo = mid; else hi = mid;
        }
        struct tm after;
        t = (time_t)hi;
        localtime_r(&t, &after);
        int64_t wb = hi + prev.tm_gmtoff, wa = hi + after.tm_gmtoff;
        int64_t wlo = (wb < wa ? wb : wa) - 7200, whi = (wb > wa ? wb : wa) + 7200;
        for (int isdst = -1; isdst <= 1; isdst++) {
            for (int64_t w = wlo; w <= whi; w += 900) push_wall(w, isdst);
            for (int d = -1; d <= 1; d++) {
                push_wall(wb + d, isdst);
                push_wall(wa + d, isdst);
            }
        }
        transitions++;
        prev = cur;
    }
    return transitions;
}

static void add_fixed_edges(void) {
    static const int years[] = { -1900, -1, 0, 69, 70, 100, 200, 138, 137, 300, 1100, 8099,
                                 INT_MAX, INT_MAX - 1, INT_MAX - 1900, INT_MIN, INT_MIN + 1,
                                 -2147481748, 2147481747, 292277026, -292275055, 67768036,
                                 67768037, -67768040, -67768041 };
    static const int mons[] = { 0, 1, 2, 11, 12, -1, -12, -13, 24, INT_MAX, INT_MIN };
    static const int mdays[] = { 1, 28, 29, 30, 31, 0, -1, 32, 366, INT_MAX, INT_MIN };
    for (size_t y = 0; y < sizeof years / sizeof *years; y++)
        for (size_t m = 0; m < sizeof mons / sizeof *mons; m++)
            for (size_t d = 0; d < sizeof mdays / sizeof *mdays; d++)
                for (int isdst = -1; isdst <= 1; isdst++) {
                    struct input in = { years[y], mons[m], mdays[d], 12, 0, 0, isdst };
                    push(in);
                }
    /* Leap days and the epoch / 2038 / 32-bit edges, with out-of-range h/m/s. */
    static const int secs[] = { 0, 59, 60, 61, -1, INT_MAX, INT_MIN, 86400 };
    static const int hms_years[] = { 0, 69, 70, 100, 138, 200, 400 };
    for (size_t y = 0; y < sizeof hms_years / sizeof *hms_years; y++)
        for (size_t s = 0; s < sizeof secs / sizeof *secs; s++)
            for (int isdst = -1; isdst <= 1; isdst++) {
                struct input a = { hms_years[y], 1, 29, 23, 59, secs[s], isdst };
                struct input b = { hms_years[y], 0, 1, 0, 0, secs[s], isdst };
                struct input c = { hms_years[y], 11, 31, 23, 59, secs[s], isdst };
                struct input d = { hms_years[y], 0, 1, INT_MAX, INT_MIN, secs[s], isdst };
                push(a); push(b); push(c); push(d);
            }
}

static void add_random(size_t n) {
    for (size_t i = 0; i < n; i++) {
        struct input in;
        /* Mostly plausible years; the extremes are rarer because glibc's search for a
         * tm_isdst that does not exist there costs up to ~900 conversions. */
        int r = (int)(rnd() % 100);
        if (r < 60) in.year = rnd_range(-50, 250);              /* 1850..2150 */
        else if (r < 80) in.year = rnd_range(60, 140);          /* 1960..2040 */
        else if (r < 92) in.year = rnd_range(-5000, 12000);
        else if (r < 97) in.year = rnd_range(-2000000, 2000000);
        else if (r < 98) in.year = rnd_int();
        else if (r < 99) in.year = INT_MAX - rnd_range(0, 3000);
        else in.year = INT_MIN + rnd_range(0, 3000);

        r = (int)(rnd() % 20);
        in.mon = r < 17 ? rnd_range(0, 11) : r < 19 ? rnd_range(-60, 60) : rnd_int();
        r = (int)(rnd() % 20);
        in.mday = r < 16 ? rnd_range(1, 31) : r < 18 ? rnd_range(-800, 800) : r < 19 ? rnd_range(0, 1) * 32 : rnd_int();
        r = (int)(rnd() % 20);
        in.hour = r < 16 ? rnd_range(0, 23) : r < 19 ? rnd_range(-200, 200) : rnd_int();
        r = (int)(rnd() % 20);
        in.min = r < 16 ? rnd_range(0, 59) : r < 19 ? rnd_range(-5000, 5000) : rnd_int();
        r = (int)(rnd() % 20);
        in.sec = r < 14 ? rnd_range(0, 59) : r < 16 ? rnd_range(60, 61) : r < 19 ? rnd_range(-200000, 200000) : rnd_int();
        r = (int)(rnd() % 40);
        in.isdst = r < 13 ? -1 : r < 26 ? 0 : r < 38 ? 1 : r < 39 ? rnd_range(2, 1000) : rnd_range(-1000, -2);
        push(in);
    }
}

static void build_inputs(size_t n_random) {
    rng_state = 0x9E3779B97F4A7C15ULL;
    add_transition_edges();
    add_fixed_edges();
    n_edges = n_inputs;
    add_random(n_random);
}

static void to_tm(const struct input *in, struct tm *tm) {
    memset(tm, 0, sizeof *tm);
    tm->tm_year = in->year;
    tm->tm_mon = in->mon;
    tm->tm_mday = in->mday;
    tm->tm_hour = in->hour;
    tm->tm_min = in->min;
    tm->tm_sec = in->sec;
    tm->tm_isdst = in->isdst;
    /* mktime must ignore these. */
    tm->tm_wday = 99;
    tm->tm_yday = -99;
    tm->tm_gmtoff = 12345;
    tm->tm_zone = "junk";
}

/* ------------------------------------------------------------ formatting */

static const char *zs(const char *s) { return s ? s : "(null)"; }

static int format_result(char *buf, size_t len, size_t i, const struct input *in, time_t r, int err,
                         const struct tm *tm) {
    return snprintf(buf, len,
        "%zu in=%d/%d/%d %d:%d:%d dst=%d -> %lld errno=%d tm=%d/%d/%d %d:%d:%d wday=%d yday=%d dst=%d off=%ld zone=%s"
        " | tzname=%s/%s timezone=%ld daylight=%d\n",
        i, in->year, in->mon, in->mday, in->hour, in->min, in->sec, in->isdst, (long long)r, err,
        tm->tm_year, tm->tm_mon, tm->tm_mday, tm->tm_hour, tm->tm_min, tm->tm_sec, tm->tm_wday,
        tm->tm_yday, tm->tm_isdst, tm->tm_gmtoff, zs(tm->tm_zone),
        zs(tzname[0]), zs(tzname[1]), timezone, daylight);
}

static uint64_t fnv(uint64_t h, const char *s) {
    for (; *s; s++) { h ^= (unsigned char)*s; h *= 0x100000001b3ULL; }
    return h;
}

/* ------------------------------------------------------------- summary/lines */

static int run_sequence(int lines) {
    uint64_t h = 0xcbf29ce484222325ULL;
    size_t ok = 0, minus_one_ok = 0, eoverflow = 0, other = 0;
    char buf[512];
    for (size_t i = 0; i < n_inputs; i++) {
        struct tm tm;
        to_tm(&inputs[i], &tm);
        errno = 0;
        time_t r = mktime(&tm);
        int e = errno;
        format_result(buf, sizeof buf, i, &inputs[i], r, e, &tm);
        h = fnv(h, buf);
        if (lines) fputs(buf, stdout);
        if (r != (time_t)-1) ok++;
        else if (e == 0) minus_one_ok++;
        else if (e == EOVERFLOW) eoverflow++;
        else other++;
    }
    printf("zone=%s inputs=%zu edges=%zu hash=%016llx ok=%zu minus_one_ok=%zu eoverflow=%zu other_errno=%zu\n",
           zs(getenv("TZ")), n_inputs, n_edges, (unsigned long long)h, ok, minus_one_ok, eoverflow, other);
    return 0;
}

/* ----------------------------------------------------------------- inproc */

static mktime_fn glibc_mktime, glibc_timelocal;
static localtime_fn glibc_localtime;
static ctime_fn glibc_ctime;
static size_t diffs, compared, side_compared;
static long long (*tz_real_calls)(void);
static int (*tz_cache_active)(void);
static unsigned (*tz_cache_intervals)(void);

static void report(const char *what, size_t i, const char *ours, const char *theirs) {
    diffs++;
    if (diffs <= 5) printf("DIFF %s input #%zu\n  ours:  %s  glibc: %s", what, i, ours, theirs);
}

struct globals { const char *tzn0, *tzn1; long tz; int dl; };
static void snap(struct globals *g) { g->tzn0 = tzname[0]; g->tzn1 = tzname[1]; g->tz = timezone; g->dl = daylight; }
static int tm_equal(const struct tm *a, const struct tm *b) {
    return a->tm_year == b->tm_year && a->tm_mon == b->tm_mon && a->tm_mday == b->tm_mday &&
           a->tm_hour == b->tm_hour && a->tm_min == b->tm_min && a->tm_sec == b->tm_sec &&
           a->tm_wday == b->tm_wday && a->tm_yday == b->tm_yday && a->tm_isdst == b->tm_isdst &&
           a->tm_gmtoff == b->tm_gmtoff && a->tm_zone == b->tm_zone;
}

static void compare_one(size_t i, int use_timelocal) {
    const struct input *in = &inputs[i];
    struct tm a, b;
    struct globals ga, gb;
    to_tm(in, &a);
    to_tm(in, &b);
    errno = 0;
    time_t ra = use_timelocal ? timelocal(&a) : mktime(&a);
    int ea = errno;
    snap(&ga);
    errno = 0;
    time_t rb = use_timelocal ? glibc_timelocal(&b) : glibc_mktime(&b);
    int eb = errno;
    snap(&gb);
    compared++;
    if (ra != rb || ea != eb || !tm_equal(&a, &b) || ga.tzn0 != gb.tzn0 || ga.tzn1 != gb.tzn1 ||
        ga.tz != gb.tz || ga.dl != gb.dl) {
        char x[512], y[512];
        format_result(x, sizeof x, i, in, ra, ea, &a);
        format_result(y, sizeof y, i, in, rb, eb, &b);
        if (ga.tzn0 != gb.tzn0 || ga.tzn1 != gb.tzn1) strcat(y, "  (tzname pointers differ)\n");
        report(use_timelocal ? "timelocal" : "mktime", i, x, y);
    }
    if (ra == (time_t)-1 || i % 7 != 0) return;

    /* localtime and ctime on the result (and a neighbour), ours vs glibc's. */
    time_t ts[2] = { ra, ra + 1800 };
    for (int k = 0; k < 2; k++) {
        errno = 0;
        struct tm *pa = localtime(&ts[k]);
        int la = errno;
        struct tm ca;
        if (pa) ca = *pa;
        snap(&ga);
        errno = 0;
        struct tm *pb = glibc_localtime(&ts[k]);
        int lb = errno;
        snap(&gb);
        side_compared++;
        if (pa != pb || la != lb || (pa && !tm_equal(&ca, pb)) || ga.tzn0 != gb.tzn0 || ga.tzn1 != gb.tzn1 ||
            ga.tz != gb.tz || ga.dl != gb.dl) {
            char x[512], y[512];
            struct input lin = { 0, 0, 0, 0, 0, 0, 0 };
            struct tm zero;
            memset(&zero, 0, sizeof zero);
            format_result(x, sizeof x, i, &lin, (time_t)(intptr_t)pa, la, pa ? &ca : &zero);
            format_result(y, sizeof y, i, &lin, (time_t)(intptr_t)pb, lb, pb ? pb : &zero);
            report("localtime", i, x, y);
        }
        char sa[64] = "", sb[64] = "";
        char *qa = ctime(&ts[k]);
        if (qa) snprintf(sa, sizeof sa, "%s", qa);
        char *qb = glibc_ctime(&ts[k]);
        if (qb) snprintf(sb, sizeof sb, "%s", qb);
        if ((qa == NULL) != (qb == NULL) || qa != qb || strcmp(sa, sb) != 0) report("ctime", i, sa, sb);
    }
}

static void *inproc_thread(void *arg) {
    (void)arg;
    int (*is_fiber)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_is_fiber");
    printf("fiber=%d\n", is_fiber ? is_fiber() : 0);
    for (size_t i = 0; i < n_inputs; i++) compare_one(i, i % 11 == 5);
    return NULL;
}

/* Concurrent localtime_r -> mktime round trips. A wall time that occurs twice with
 * the same tm_isdst (Test/Odd's 2020 jump from +5:45 back to -11:00) has two right
 * answers, and which one mktime picks depends on the UTC offset of the previous call
 * in any thread (glibc's static localtime_offset): natively as preloaded. So a round
 * trip fails only when the answer does not convert back to the same wall time. */
static volatile int rt_failures, rt_ambiguous;
static void *roundtrip_thread(void *arg) {
    int64_t base = (int64_t)(intptr_t)arg;
    for (int64_t k = 0; k < 50000; k++) {
        time_t t = (time_t)(base + k * 7919 * 60 + k);
        struct tm tm, want, again;
        localtime_r(&t, &tm);
        want = tm;
        time_t back = mktime(&tm);
        if (back == t) continue;
        if (back != (time_t)-1 && localtime_r(&back, &again) && again.tm_year == want.tm_year &&
            again.tm_mon == want.tm_mon && again.tm_mday == want.tm_mday && again.tm_hour == want.tm_hour &&
            again.tm_min == want.tm_min && again.tm_sec == want.tm_sec && again.tm_isdst == want.tm_isdst)
            __atomic_fetch_add(&rt_ambiguous, 1, __ATOMIC_RELAXED);
        else
            __atomic_fetch_add(&rt_failures, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static int run_inproc(void) {
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (!libc) { fprintf(stderr, "dlopen libc.so.6: %s\n", dlerror()); return 2; }
    glibc_mktime = (mktime_fn)dlsym(libc, "mktime");
    glibc_timelocal = (mktime_fn)dlsym(libc, "timelocal");
    glibc_localtime = (localtime_fn)dlsym(libc, "localtime");
    glibc_ctime = (ctime_fn)dlsym(libc, "ctime");
    if (!glibc_mktime || !glibc_timelocal || !glibc_localtime || !glibc_ctime) {
        fprintf(stderr, "dlsym in libc.so.6 failed\n");
        return 2;
    }
    void *ours = dlsym(RTLD_DEFAULT, "mktime");
    tz_real_calls = (long long (*)(void))dlsym(RTLD_DEFAULT, "fiberize_tz_real_tzset_calls");
    int (*tz_active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_tz_active");
    tz_cache_active = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_tz_cache_active");
    tz_cache_intervals = (unsigned (*)(void))dlsym(RTLD_DEFAULT, "fiberize_tz_cache_intervals");
    printf("preloaded=%d distinct_impl=%d tz_active=%d\n", tz_real_calls != NULL, ours != (void *)glibc_mktime,
           tz_active ? tz_active() : 0);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t th;
    if (pthread_create(&th, NULL, inproc_thread, NULL) != 0) { perror("pthread_create"); return 2; }
    pthread_join(th, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);

    pthread_t rt[4];
    for (int k = 0; k < 4; k++)
        pthread_create(&rt[k], NULL, roundtrip_thread, (void *)(intptr_t)(-2000000000LL + k * 1000000007LL));
    for (int k = 0; k < 4; k++) pthread_join(rt[k], NULL);

    printf("zone=%s inputs=%zu compared=%zu localtime_ctime_compared=%zu differences=%zu roundtrip_failures=%d roundtrip_ambiguous=%d "
           "real_tzset_calls=%lld cache_active=%d cache_intervals=%u seconds=%.2f\n",
           zs(getenv("TZ")), n_inputs, compared, side_compared, diffs, rt_failures, rt_ambiguous,
           tz_real_calls ? tz_real_calls() : -1LL, tz_cache_active ? tz_cache_active() : -1,
           tz_cache_intervals ? tz_cache_intervals() : 0u,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    return 0;
}

/* ----------------------------------------------------------------- pickup */

static void show(const char *label) {
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    tm.tm_year = 120; tm.tm_mon = 5; tm.tm_mday = 1; tm.tm_hour = 12; tm.tm_isdst = -1;
    time_t r = mktime(&tm);
    time_t t0 = 1600000000;
    struct tm *lt = localtime(&t0);
    char lts[64];
    snprintf(lts, sizeof lts, "%02d:%02d dst=%d off=%ld %s", lt->tm_hour, lt->tm_min, lt->tm_isdst, lt->tm_gmtoff,
             zs(lt->tm_zone));
    struct tm *gt = gmtime(&t0);
    char *ct = ctime(&t0);
    printf("%-28s TZ=%-28s mktime=%lld (%s off=%ld) localtime=[%s] shared_buffer=%d ctime=%s", label,
           zs(getenv("TZ")), (long long)r, zs(tm.tm_zone), tm.tm_gmtoff, lts, lt == gt, ct);
    printf("%-28s tzname=%s/%s timezone=%ld daylight=%d\n", "", zs(tzname[0]), zs(tzname[1]), timezone, daylight);
}

static int run_pickup(void) {
    static char putbuf[16] = "TZ=UTC0";
    setenv("TZ", "UTC", 1); tzset(); show("setenv UTC + tzset");
    setenv("TZ", "Asia/Kolkata", 1); show("setenv Kolkata, no tzset");
    setenv("TZ", "America/New_York", 1); tzset(); show("setenv New_York + tzset");
    setenv("TZ", "Australia/Sydney", 1); show("setenv Sydney");
    setenv("TZ", "Asia/Kolkata", 1); show("back to Kolkata");
    setenv("TZ", ":Europe/Berlin", 1); show("colon Berlin");
    setenv("TZ", "", 1); show("empty TZ");
    setenv("TZ", "<+0330>-3:30", 1); show("POSIX +0330");
    setenv("TZ", "EST5EDT,M3.2.0,M11.1.0", 1); tzset(); show("POSIX EST5EDT");
    putenv(putbuf); show("putenv UTC0");
    memcpy(putbuf, "TZ=JST-9", sizeof "TZ=JST-9"); show("putenv buffer -> JST-9");
    unsetenv("TZ"); show("unset (/etc/localtime)");
    tzset(); show("unset + tzset");
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "summary";
    size_t n = argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : 100000;
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    if (strcmp(mode, "pickup") == 0) return run_pickup();
    build_inputs(n);
    if (strcmp(mode, "summary") == 0) return run_sequence(0);
    if (strcmp(mode, "lines") == 0) return run_sequence(1);
    if (strcmp(mode, "inproc") == 0) return run_inproc();
    fprintf(stderr, "usage: %s summary|lines|inproc [N] | pickup\n", argv[0]);
    return 2;
}
