/* tpcc: a TPC-C client on libmariadb, one pthread per terminal.
 *
 *   tpcc load  -w N [-j JOBS]                     schema + initial population
 *   tpcc run   -w N -t TERMINALS -d SECONDS [--no-wait] [--ramp S] [--wait-scale F] [--report S]
 *   tpcc check -w N                               consistency conditions 1-4
 *
 * Connection options for all: -H host (127.0.0.1) -P port (3306) -u user (root)
 * -p password ("") -D database (tpcc). This file: the command line, the connection
 * helpers and the random input of clause 2.1.6 / 4.3.2; load.c, run.c and check.c do
 * the three commands. */
#define _GNU_SOURCE
#include "tpcc.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

struct options opt = {
    .host = "127.0.0.1",
    .user = "root",
    .password = "",
    .database = "tpcc",
    .port = 3306,
    .warehouses = 1,
    .terminals = 10,
    .seconds = 60,
    .report_every = 5,
    .jobs = 4,
    .wait_scale = 1.0,
};

MYSQL *db_connect(int with_database) {
    MYSQL *db = mysql_init(NULL);
    if (!db) return NULL;
    unsigned timeout = 60;
    mysql_optionsv(db, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    if (!mysql_real_connect(db, opt.host, opt.user, opt.password, with_database ? opt.database : NULL, opt.port, NULL, 0)) {
        fprintf(stderr, "tpcc: connect to %s:%u: %s\n", opt.host, opt.port, mysql_error(db));
        mysql_close(db);
        return NULL;
    }
    return db;
}

void die_db(MYSQL *db, const char *what) {
    fprintf(stderr, "tpcc: %s: %s (%u)\n", what, db ? mysql_error(db) : "no connection", db ? mysql_errno(db) : 0);
    exit(1);
}

static int vexec(MYSQL *db, const char *fmt, va_list ap) {
    char stack_buf[2048];
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(stack_buf, sizeof stack_buf, fmt, ap);
    char *sql = stack_buf;
    if (n >= (int)sizeof stack_buf) {
        sql = malloc(n + 1);
        vsnprintf(sql, n + 1, fmt, copy);
    }
    va_end(copy);
    int rc = mysql_real_query(db, sql, n) ? (int)mysql_errno(db) : 0;
    if (sql != stack_buf) free(sql);
    return rc;
}

int db_exec(MYSQL *db, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vexec(db, fmt, ap);
    va_end(ap);
    if (rc == 0) {
        /* A statement with a result set (none of ours): drain it. */
        MYSQL_RES *r = mysql_store_result(db);
        if (r) mysql_free_result(r);
    }
    return rc;
}

int db_select(MYSQL *db, MYSQL_RES **res, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vexec(db, fmt, ap);
    va_end(ap);
    *res = NULL;
    if (rc) return rc;
    *res = mysql_store_result(db);
    if (!*res && mysql_errno(db)) return (int)mysql_errno(db);
    return 0;
}

int db_row(MYSQL *db, MYSQL_RES **res, MYSQL_ROW *row, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vexec(db, fmt, ap);
    va_end(ap);
    *res = NULL;
    if (rc) return rc;
    *res = mysql_store_result(db);
    if (!*res) return mysql_errno(db) ? (int)mysql_errno(db) : -1;
    *row = mysql_fetch_row(*res);
    return *row ? 0 : -1;
}

int db_value(MYSQL *db, double *value, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vexec(db, fmt, ap);
    va_end(ap);
    if (rc) return rc;
    MYSQL_RES *r = mysql_store_result(db);
    if (!r) return mysql_errno(db) ? (int)mysql_errno(db) : -1;
    MYSQL_ROW row = mysql_fetch_row(r);
    rc = row && row[0] ? 0 : -1;
    if (rc == 0) *value = atof(row[0]);
    mysql_free_result(r);
    return rc;
}

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

static void usage(void) {
    fprintf(stderr,
            "usage: tpcc load  -w N [-j JOBS]\n"
            "       tpcc run   -w N -t TERMINALS -d SECONDS [--no-wait] [--ramp S] [--wait-scale F] [--report S]\n"
            "       tpcc check -w N\n"
            "connection: -H host (127.0.0.1) -P port (3306) -u user (root) -p password -D database (tpcc)\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 2) usage();
    const char *cmd = argv[1];
    static const struct option longs[] = {
        {"no-wait", no_argument, NULL, 'n'},    {"ramp", required_argument, NULL, 'r'},
        {"report", required_argument, NULL, 'R'}, {"wait-scale", required_argument, NULL, 's'},
        {NULL, 0, NULL, 0},
    };
    int c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "H:P:u:p:D:w:t:d:j:", longs, NULL)) != -1) {
        switch (c) {
        case 'H': opt.host = optarg; break;
        case 'P': opt.port = (unsigned)atoi(optarg); break;
        case 'u': opt.user = optarg; break;
        case 'p': opt.password = optarg; break;
        case 'D': opt.database = optarg; break;
        case 'w': opt.warehouses = atoi(optarg); break;
        case 't': opt.terminals = atoi(optarg); break;
        case 'd': opt.seconds = atoi(optarg); break;
        case 'j': opt.jobs = atoi(optarg); break;
        case 'n': opt.no_wait = 1; break;
        case 'r': opt.ramp_seconds = atoi(optarg); break;
        case 'R': opt.report_every = atoi(optarg); break;
        case 's': opt.wait_scale = atof(optarg); break;
        default: usage();
        }
    }
    if (opt.warehouses < 1 || opt.terminals < 1 || opt.seconds < 1 || opt.jobs < 1 || opt.report_every < 1) usage();
    /* One socket per terminal: raise the descriptor limit to what the hard limit allows. */
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    if (mysql_library_init(0, NULL, NULL)) {
        fprintf(stderr, "tpcc: mysql_library_init failed\n");
        return 1;
    }
    int rc;
    if (!strcmp(cmd, "load")) rc = cmd_load();
    else if (!strcmp(cmd, "run")) rc = cmd_run();
    else if (!strcmp(cmd, "check")) rc = cmd_check();
    else usage();
    mysql_library_end();
    return rc;
}
