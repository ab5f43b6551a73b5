/* The TPC-C client's options (their defaults; tpcc.c fills them from the command line),
 * its connection and its statement helpers: shared by load.c, run.c and check.c. */
#define _GNU_SOURCE
#include "tpcc.h"

#include <stdarg.h>
#include <stdlib.h>

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
