/* A TPC-C client on libmariadb: shared declarations of db.c (options, connection and
 * statement helpers), input.c (random input, clock), load.c (schema and initial
 * population), run.c (terminals) and check.c (consistency conditions 1-4), which tpcc.c
 * (the command line) dispatches to. See README.md beside this file. */
#ifndef TPCC_H
#define TPCC_H

#include <mysql.h>
#include <stdint.h>
#include <stdio.h>

/* Cardinalities of the TPC-C specification (clause 1.2 / 4.3). */
#define ITEMS 100000
#define DIST_PER_WARE 10
#define CUST_PER_DIST 3000
#define ORD_PER_DIST 3000
#define FIRST_UNDELIVERED 2101 /* orders 2101..3000 of each district are in NEW_ORDERS */

/* Where the database is, and the scale; defaults in db.c, filled from the command line
 * by tpcc.c. */
struct options {
    const char *host, *user, *password, *database;
    unsigned port;
    int warehouses, terminals, seconds, ramp_seconds, report_every, jobs;
    int no_wait;
    double wait_scale; /* multiplies keying and think times (1 = the specification's) */
};
extern struct options opt;

/* Connection: a MYSQL handle on opt's database (NULL and a message on failure). */
MYSQL *db_connect(int with_database);
/* Runs one statement built like printf; returns 0 or the server's error number. */
int db_exec(MYSQL *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Runs a query and stores its result in *res (NULL if it has no rows); 0 or an error number. */
int db_select(MYSQL *db, MYSQL_RES **res, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* db_select, then the first row in *row; -1 if there is none (*res is freed by the caller). */
int db_row(MYSQL *db, MYSQL_RES **res, MYSQL_ROW *row, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The first column of the first row as a number; 0 or an error number (ENOENT-like -1: no row). */
int db_value(MYSQL *db, double *value, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void die_db(MYSQL *db, const char *what) __attribute__((noreturn));

/* Per-thread random input generation (clause 2.1.6 and 4.3.2). */
struct rng {
    uint64_t state;
};
void rng_seed(struct rng *r, uint64_t seed);
uint64_t rng_next(struct rng *r);
int rand_int(struct rng *r, int lo, int hi); /* uniform in [lo, hi] */
int nurand(struct rng *r, int a, int x, int y);
/* An a-string (letters and digits) of rand_int(lo, hi) characters into out; returns its length. */
int rand_astring(struct rng *r, char *out, int lo, int hi);
int rand_nstring(struct rng *r, char *out, int lo, int hi);
/* The customer last name of a number in 0..999 (clause 4.3.2.3); out must hold 16 bytes. */
void last_name(int num, char *out);
/* The NURand constant C of a run, different from the load's as clause 2.1.6.1 asks. */
#define C_LAST_LOAD 157
#define C_LAST_RUN 223
#define C_ID 259
#define C_OL_I_ID 7911
double now_seconds(void);

int cmd_load(void);
int cmd_run(void);
int cmd_check(void);

#endif
