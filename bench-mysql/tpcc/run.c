/* tpcc run: one pthread per terminal, each with its own connection, home warehouse
 * (terminal % W + 1) and district (for Stock-Level), looping over the five transactions
 * of clause 2 with the mix 45/43/4/4/4, keying time before and a negative-exponential
 * think time after each (clause 5.2.5; --no-wait drops both, --wait-scale multiplies
 * them). InnoDB deadlocks and lock wait timeouts are rolled back and the same input
 * retried. Transactions that end inside the measured window (after --ramp) count;
 * the main thread prints a progress line every --report seconds and samples the
 * process's kernel threads and RSS (/proc/self/status) and CPU time (getrusage). */
#define _GNU_SOURCE
#include "tpcc.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

enum { NEW_ORDER, PAYMENT, ORDER_STATUS, DELIVERY, STOCK_LEVEL, TYPES };
static const char *type_name[TYPES] = {"new_order", "payment", "order_status", "delivery", "stock_level"};
static const double keying_s[TYPES] = {18, 3, 2, 2, 2};      /* clause 5.2.5.7 */
static const double think_mean_s[TYPES] = {12, 12, 10, 5, 5}; /* clause 5.2.5.7 */

#define USER_ROLLBACK 1 /* New-Order with an unused item: rolled back on purpose */
#define NO_ROW (-1)     /* a row the transaction needs was not there */
#define MAX_RETRIES 50

/* Response times: buckets 5 % wide from 1 us to ~100 s. */
#define BUCKETS 400
static const double bucket_growth = 1.05;
static atomic_long hist[TYPES][BUCKETS];
static atomic_long done_in_window[TYPES], done_total, new_orders_total, errors, retries, user_rollbacks, connect_failures;
static double sum_latency_s[TYPES];
static pthread_mutex_t sum_lock = PTHREAD_MUTEX_INITIALIZER;

static double window_begin, window_end;
static atomic_int connected, go, finished;
static pthread_mutex_t go_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go_cond = PTHREAD_COND_INITIALIZER;

struct terminal {
    int id, w_id, d_id;
    MYSQL *db;
    struct rng r;
    pthread_t thread;
};

/* Sleeps s seconds, or until the end of the run; returns 0 if the run is over. */
static int wait_or_stop(double s) {
    double wake = now_seconds() + s;
    if (wake > window_end) wake = window_end;
    struct timespec ts = {(time_t)wake, (long)((wake - (time_t)wake) * 1e9)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
    return now_seconds() < window_end;
}

/* Inputs of the transactions, drawn before the keying time (clause 2.4.1 - 2.8.1). */
struct order_item {
    int i_id, supply_w_id, quantity;
};
struct input {
    int d_id, c_w_id, c_d_id, c_id, by_name, amount_cents, ol_cnt, all_local, carrier_id, threshold;
    char c_last[16];
    struct order_item items[15];
};

static int by_item_then_warehouse(const void *a, const void *b) { /* lock stock rows in one order */
    const struct order_item *x = a, *y = b;
    return x->i_id != y->i_id ? x->i_id - y->i_id : x->supply_w_id - y->supply_w_id;
}

static void customer_choice(struct terminal *t, struct input *in) { /* 60 % by last name */
    in->by_name = rand_int(&t->r, 1, 100) <= 60;
    last_name(nurand(&t->r, 255, 0, 999), in->c_last);
    in->c_id = nurand(&t->r, 1023, 1, CUST_PER_DIST);
}

static void draw_input(struct terminal *t, int type, struct input *in) {
    struct rng *r = &t->r;
    int W = opt.warehouses;
    memset(in, 0, sizeof *in);
    in->d_id = rand_int(r, 1, DIST_PER_WARE);
    switch (type) {
    case NEW_ORDER:
        in->c_id = nurand(r, 1023, 1, CUST_PER_DIST);
        in->ol_cnt = rand_int(r, 5, 15);
        in->all_local = 1;
        for (int i = 0; i < in->ol_cnt; i++) {
            struct order_item *it = &in->items[i];
            it->i_id = nurand(r, 8191, 1, ITEMS);
            it->supply_w_id = t->w_id;
            if (W > 1 && rand_int(r, 1, 100) == 1) { /* 1 % from a remote warehouse */
                while ((it->supply_w_id = rand_int(r, 1, W)) == t->w_id) {}
                in->all_local = 0;
            }
            it->quantity = rand_int(r, 1, 10);
        }
        if (rand_int(r, 1, 100) == 1) in->items[in->ol_cnt - 1].i_id = ITEMS + 1; /* the 1 % rollback */
        qsort(in->items, (size_t)in->ol_cnt, sizeof in->items[0], by_item_then_warehouse);
        break;
    case PAYMENT:
        in->c_w_id = t->w_id;
        in->c_d_id = in->d_id;
        if (W > 1 && rand_int(r, 1, 100) > 85) { /* 15 % pay through a remote warehouse */
            while ((in->c_w_id = rand_int(r, 1, W)) == t->w_id) {}
            in->c_d_id = rand_int(r, 1, DIST_PER_WARE);
        }
        customer_choice(t, in);
        in->amount_cents = rand_int(r, 100, 500000);
        break;
    case ORDER_STATUS: customer_choice(t, in); break;
    case DELIVERY: in->carrier_id = rand_int(r, 1, 10); break;
    case STOCK_LEVEL:
        in->d_id = t->d_id;
        in->threshold = rand_int(r, 10, 20);
        break;
    }
}

#define TRY(x)                                                                                                         \
    do {                                                                                                               \
        if ((rc = (x)) != 0) goto out;                                                                                 \
    } while (0)

static void free_result(MYSQL_RES **res) {
    if (*res) mysql_free_result(*res);
    *res = NULL;
}

static int new_order(struct terminal *t, const struct input *in, MYSQL_RES **res) {
    MYSQL *db = t->db;
    MYSQL_ROW row;
    int rc, w = t->w_id, d = in->d_id;
    double w_tax;
    char lines[15 * 120 + 64];
    TRY(db_value(db, &w_tax, "SELECT w_tax FROM warehouse WHERE w_id=%d", w));
    TRY(db_row(db, res, &row, "SELECT d_tax, d_next_o_id FROM district WHERE d_w_id=%d AND d_id=%d FOR UPDATE", w, d));
    int o_id = atoi(row[1]);
    free_result(res);
    TRY(db_exec(db, "UPDATE district SET d_next_o_id=%d WHERE d_w_id=%d AND d_id=%d", o_id + 1, w, d));
    TRY(db_row(db, res, &row, "SELECT c_discount, c_last, c_credit FROM customer WHERE c_w_id=%d AND c_d_id=%d AND c_id=%d",
                  w, d, in->c_id));
    free_result(res);
    TRY(db_exec(db, "INSERT INTO orders VALUES (%d,%d,%d,%d,NOW(),NULL,%d,%d)", o_id, d, w, in->c_id, in->ol_cnt,
                in->all_local));
    TRY(db_exec(db, "INSERT INTO new_orders VALUES (%d,%d,%d)", o_id, d, w));
    int len = sprintf(lines, "INSERT INTO order_line VALUES ");
    for (int l = 0; l < in->ol_cnt; l++) {
        const struct order_item *it = &in->items[l];
        TRY(db_select(db, res, "SELECT i_price, i_name, i_data FROM item WHERE i_id=%d", it->i_id));
        if (!*res || !(row = mysql_fetch_row(*res))) {
            rc = USER_ROLLBACK; /* the unused item: clause 2.4.2.3 */
            goto out;
        }
        double price = atof(row[0]);
        free_result(res);
        TRY(db_row(db, res, &row, "SELECT s_quantity, s_dist_%02d FROM stock WHERE s_w_id=%d AND s_i_id=%d FOR UPDATE", d,
                      it->supply_w_id, it->i_id));
        int quantity = atoi(row[0]);
        char dist_info[25];
        snprintf(dist_info, sizeof dist_info, "%s", row[1] ? row[1] : "");
        free_result(res);
        quantity = quantity - it->quantity >= 10 ? quantity - it->quantity : quantity - it->quantity + 91;
        TRY(db_exec(db,
                    "UPDATE stock SET s_quantity=%d, s_ytd=s_ytd+%d, s_order_cnt=s_order_cnt+1, s_remote_cnt=s_remote_cnt+%d"
                    " WHERE s_w_id=%d AND s_i_id=%d",
                    quantity, it->quantity, it->supply_w_id != w, it->supply_w_id, it->i_id));
        len += sprintf(lines + len, "%s(%d,%d,%d,%d,%d,%d,NULL,%d,%.2f,'%s')", l ? "," : "", o_id, d, w, l + 1, it->i_id,
                       it->supply_w_id, it->quantity, it->quantity * price, dist_info);
    }
    TRY(db_exec(db, "%s", lines));
out:
    return rc;
}

/* The customer of Payment and Order-Status: by id, or the middle one of those with the
 * last name sorted by first name (clause 2.5.2.2). Sets *c_id. */
static int find_customer(MYSQL *db, int w, int d, const struct input *in, int *c_id) {
    MYSQL_RES *res = NULL;
    MYSQL_ROW row = NULL;
    int rc = 0;
    *c_id = in->c_id;
    if (!in->by_name) return 0;
    TRY(db_select(db, &res, "SELECT c_id FROM customer WHERE c_w_id=%d AND c_d_id=%d AND c_last='%s' ORDER BY c_first", w,
                  d, in->c_last));
    my_ulonglong n = res ? mysql_num_rows(res) : 0;
    if (n == 0) {
        rc = NO_ROW;
        goto out;
    }
    mysql_data_seek(res, (n + 1) / 2 - 1);
    if ((row = mysql_fetch_row(res))) *c_id = atoi(row[0]);
out:
    free_result(&res);
    return rc;
}

static int payment(struct terminal *t, const struct input *in, MYSQL_RES **res) {
    MYSQL *db = t->db;
    MYSQL_ROW row;
    int rc, w = t->w_id, d = in->d_id, c_id;
    char amount[16], w_name[16], d_name[16];
    snprintf(amount, sizeof amount, "%d.%02d", in->amount_cents / 100, in->amount_cents % 100);
    TRY(db_exec(db, "UPDATE warehouse SET w_ytd=w_ytd+%s WHERE w_id=%d", amount, w));
    TRY(db_row(db, res, &row, "SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip FROM warehouse WHERE w_id=%d",
                  w));
    snprintf(w_name, sizeof w_name, "%s", row[0]);
    free_result(res);
    TRY(db_exec(db, "UPDATE district SET d_ytd=d_ytd+%s WHERE d_w_id=%d AND d_id=%d", amount, w, d));
    TRY(db_row(db, res, &row,
                  "SELECT d_name, d_street_1, d_street_2, d_city, d_state, d_zip FROM district WHERE d_w_id=%d AND d_id=%d",
                  w, d));
    snprintf(d_name, sizeof d_name, "%s", row[0]);
    free_result(res);
    TRY(find_customer(db, in->c_w_id, in->c_d_id, in, &c_id));
    TRY(db_row(db, res, &row,
                  "SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, c_phone, c_since,"
                  " c_credit, c_credit_lim, c_discount, c_balance FROM customer WHERE c_w_id=%d AND c_d_id=%d AND c_id=%d"
                  " FOR UPDATE",
                  in->c_w_id, in->c_d_id, c_id));
    int bad_credit = row[10] && !strcmp(row[10], "BC");
    free_result(res);
    if (bad_credit) /* clause 2.5.2.2: the payment goes in front of C_DATA, 500 characters kept */
        TRY(db_exec(db,
                    "UPDATE customer SET c_balance=c_balance-%s, c_ytd_payment=c_ytd_payment+%s,"
                    " c_payment_cnt=c_payment_cnt+1, c_data=LEFT(CONCAT('%d %d %d %d %d %s | ', c_data), 500)"
                    " WHERE c_w_id=%d AND c_d_id=%d AND c_id=%d",
                    amount, amount, c_id, in->c_d_id, in->c_w_id, d, w, amount, in->c_w_id, in->c_d_id, c_id));
    else
        TRY(db_exec(db,
                    "UPDATE customer SET c_balance=c_balance-%s, c_ytd_payment=c_ytd_payment+%s,"
                    " c_payment_cnt=c_payment_cnt+1 WHERE c_w_id=%d AND c_d_id=%d AND c_id=%d",
                    amount, amount, in->c_w_id, in->c_d_id, c_id));
    TRY(db_exec(db, "INSERT INTO history VALUES (%d,%d,%d,%d,%d,NOW(),%s,'%s    %s')", c_id, in->c_d_id, in->c_w_id, d, w,
                amount, w_name, d_name));
out:
    return rc;
}

static int order_status(struct terminal *t, const struct input *in, MYSQL_RES **res) {
    MYSQL *db = t->db;
    MYSQL_ROW row;
    int rc, w = t->w_id, d = in->d_id, c_id;
    TRY(find_customer(db, w, d, in, &c_id));
    TRY(db_row(db, res, &row,
                  "SELECT c_balance, c_first, c_middle, c_last FROM customer WHERE c_w_id=%d AND c_d_id=%d AND c_id=%d", w,
                  d, c_id));
    free_result(res);
    TRY(db_row(db, res, &row,
                  "SELECT o_id, o_entry_d, o_carrier_id FROM orders WHERE o_w_id=%d AND o_d_id=%d AND o_c_id=%d"
                  " ORDER BY o_id DESC LIMIT 1",
                  w, d, c_id));
    int o_id = atoi(row[0]);
    free_result(res);
    TRY(db_select(db, res,
                  "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line"
                  " WHERE ol_w_id=%d AND ol_d_id=%d AND ol_o_id=%d",
                  w, d, o_id));
    free_result(res);
out:
    return rc;
}

static int delivery(struct terminal *t, const struct input *in, MYSQL_RES **res) {
    MYSQL *db = t->db;
    MYSQL_ROW row;
    int rc, w = t->w_id;
    for (int d = 1; d <= DIST_PER_WARE; d++) {
        TRY(db_select(db, res,
                      "SELECT no_o_id FROM new_orders WHERE no_w_id=%d AND no_d_id=%d ORDER BY no_o_id LIMIT 1 FOR UPDATE", w,
                      d));
        if (!*res || !(row = mysql_fetch_row(*res))) { /* nothing to deliver in this district (clause 2.7.4.2) */
            free_result(res);
            continue;
        }
        int o_id = atoi(row[0]);
        free_result(res);
        TRY(db_exec(db, "DELETE FROM new_orders WHERE no_w_id=%d AND no_d_id=%d AND no_o_id=%d", w, d, o_id));
        TRY(db_row(db, res, &row, "SELECT o_c_id FROM orders WHERE o_w_id=%d AND o_d_id=%d AND o_id=%d", w, d, o_id));
        int c_id = atoi(row[0]);
        free_result(res);
        TRY(db_exec(db, "UPDATE orders SET o_carrier_id=%d WHERE o_w_id=%d AND o_d_id=%d AND o_id=%d", in->carrier_id, w, d,
                    o_id));
        TRY(db_exec(db, "UPDATE order_line SET ol_delivery_d=NOW() WHERE ol_w_id=%d AND ol_d_id=%d AND ol_o_id=%d", w, d,
                    o_id));
        TRY(db_row(db, res, &row, "SELECT COALESCE(SUM(ol_amount),0) FROM order_line WHERE ol_w_id=%d AND ol_d_id=%d AND ol_o_id=%d",
                      w, d, o_id));
        char total[32];
        snprintf(total, sizeof total, "%s", row[0]);
        free_result(res);
        TRY(db_exec(db,
                    "UPDATE customer SET c_balance=c_balance+%s, c_delivery_cnt=c_delivery_cnt+1"
                    " WHERE c_w_id=%d AND c_d_id=%d AND c_id=%d",
                    total, w, d, c_id));
    }
out:
    return rc;
}

static int stock_level(struct terminal *t, const struct input *in, MYSQL_RES **res) {
    MYSQL *db = t->db;
    int rc, w = t->w_id, d = in->d_id;
    double next_o_id, low;
    TRY(db_value(db, &next_o_id, "SELECT d_next_o_id FROM district WHERE d_w_id=%d AND d_id=%d", w, d));
    TRY(db_value(db, &low,
                 "SELECT COUNT(DISTINCT s_i_id) FROM order_line JOIN stock ON s_w_id=%d AND s_i_id=ol_i_id"
                 " WHERE ol_w_id=%d AND ol_d_id=%d AND ol_o_id>=%d AND ol_o_id<%d AND s_quantity<%d",
                 w, w, d, (int)next_o_id - 20, (int)next_o_id, in->threshold));
out:
    return rc;
}

static int (*const transaction[TYPES])(struct terminal *, const struct input *, MYSQL_RES **) = {new_order, payment, order_status,
                                                                                    delivery, stock_level};

/* One try of a transaction: its statements, then COMMIT if they all went through. */
static int attempt(struct terminal *t, int type, const struct input *in) {
    MYSQL_RES *res = NULL;
    int rc = transaction[type](t, in, &res);
    free_result(&res);
    if (rc == 0 && mysql_commit(t->db)) rc = (int)mysql_errno(t->db);
    return rc;
}

static int pick_type(struct rng *r) { /* 45 / 43 / 4 / 4 / 4 */
    int x = rand_int(r, 1, 100);
    return x <= 45 ? NEW_ORDER : x <= 88 ? PAYMENT : x <= 92 ? ORDER_STATUS : x <= 96 ? DELIVERY : STOCK_LEVEL;
}

static MYSQL *connect_terminal(void) {
    for (int attempt = 0; attempt < 20; attempt++) { /* a burst of thousands of connects can overflow the backlog */
        MYSQL *db = db_connect(1);
        if (db) {
            if (db_exec(db, "SET autocommit=0") == 0) return db;
            mysql_close(db);
        }
        usleep(100000 * (attempt + 1));
    }
    return NULL;
}

static void record(int type, double start, double end) {
    atomic_fetch_add(&done_total, 1);
    if (type == NEW_ORDER) atomic_fetch_add(&new_orders_total, 1);
    if (end < window_begin || end > window_end) return;
    atomic_fetch_add(&done_in_window[type], 1);
    double us = (end - start) * 1e6;
    int b = us < 1 ? 0 : (int)(log(us) / log(bucket_growth));
    atomic_fetch_add(&hist[type][b < BUCKETS ? b : BUCKETS - 1], 1);
    pthread_mutex_lock(&sum_lock);
    sum_latency_s[type] += end - start;
    pthread_mutex_unlock(&sum_lock);
}

static void *terminal_main(void *arg) {
    struct terminal *t = arg;
    mysql_thread_init();
    t->db = connect_terminal();
    if (!t->db) atomic_fetch_add(&connect_failures, 1);
    atomic_fetch_add(&connected, 1);
    pthread_mutex_lock(&go_lock);
    while (!atomic_load(&go)) pthread_cond_wait(&go_cond, &go_lock);
    pthread_mutex_unlock(&go_lock);
    /* Terminals start spread over one mean cycle (keying + think of a New-Order), not all
     * at the same instant: 10 000 terminals keying in step would hit the server in bursts. */
    if (t->db && !opt.no_wait)
        wait_or_stop((rng_next(&t->r) >> 11) * 0x1.0p-53 * (keying_s[NEW_ORDER] + think_mean_s[NEW_ORDER]) * opt.wait_scale);
    while (t->db && now_seconds() < window_end) {
        int type = pick_type(&t->r);
        struct input in;
        draw_input(t, type, &in);
        if (!opt.no_wait && !wait_or_stop(keying_s[type] * opt.wait_scale)) break;
        double start = now_seconds();
        int rc, tries = 0;
        while ((rc = attempt(t, type, &in)) != 0 && rc != USER_ROLLBACK) {
            mysql_rollback(t->db);
            if ((rc == 1213 || rc == 1205) && now_seconds() >= window_end) break; /* the run is over: not an error */
            if ((rc == 1213 || rc == 1205) && ++tries < MAX_RETRIES) { /* deadlock, lock wait timeout */
                atomic_fetch_add(&retries, 1);
                continue;
            }
            atomic_fetch_add(&errors, 1);
            if (atomic_load(&errors) <= 10) fprintf(stderr, "tpcc: terminal %d: %s: error %d: %s\n", t->id, type_name[type], rc,
                                                    rc > 0 ? mysql_error(t->db) : "a row was missing");
            if (rc == 2006 || rc == 2013) { /* the connection is gone: one more */
                mysql_close(t->db);
                t->db = connect_terminal();
            }
            break;
        }
        if (rc == USER_ROLLBACK) {
            mysql_rollback(t->db);
            atomic_fetch_add(&user_rollbacks, 1);
        }
        if (rc == 0 || rc == USER_ROLLBACK) record(type, start, now_seconds());
        if (!opt.no_wait) {
            double think = -log((rng_next(&t->r) >> 11) * 0x1.0p-53 + 1e-12) * think_mean_s[type];
            if (think > 10 * think_mean_s[type]) think = 10 * think_mean_s[type];
            if (!wait_or_stop(think * opt.wait_scale)) break;
        }
    }
    if (t->db) mysql_close(t->db);
    mysql_thread_end();
    atomic_fetch_add(&finished, 1);
    return NULL;
}

/* Kernel threads and resident set of this process, from /proc/self/status. */
static void process_status(long *threads, long *rss_kib, long *hwm_kib) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        sscanf(line, "Threads: %ld", threads);
        sscanf(line, "VmRSS: %ld", rss_kib);
        sscanf(line, "VmHWM: %ld", hwm_kib);
    }
    if (f) fclose(f);
}

static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

static double percentile_ms(int type, double p) {
    long total = 0, seen = 0;
    for (int b = 0; b < BUCKETS; b++) total += atomic_load(&hist[type][b]);
    if (!total) return 0;
    for (int b = 0; b < BUCKETS; b++)
        if ((seen += atomic_load(&hist[type][b])) >= p * total) return pow(bucket_growth, b + 1) / 1000;
    return 0;
}

int cmd_run(void) {
    int n = opt.terminals;
    struct terminal *terms = calloc((size_t)n, sizeof *terms);
    long peak_threads = 0, rss = 0, hwm = 0, threads = 0;
    double t0 = now_seconds();
    window_end = 1e300; /* nobody stops before the start */
    printf("tpcc run: %d terminals on %d warehouses, %ds measured after %ds ramp, %s\n", n, opt.warehouses, opt.seconds,
           opt.ramp_seconds, opt.no_wait ? "no keying/think times" : "keying and think times");
    fflush(stdout);
    for (int i = 0; i < n; i++) {
        terms[i] = (struct terminal){.id = i, .w_id = i % opt.warehouses + 1, .d_id = i / opt.warehouses % DIST_PER_WARE + 1};
        rng_seed(&terms[i].r, (uint64_t)i * 7919 + (uint64_t)time(NULL));
        int err = pthread_create(&terms[i].thread, NULL, terminal_main, &terms[i]);
        if (err) {
            fprintf(stderr, "tpcc: pthread_create for terminal %d of %d: %s\n", i + 1, n, strerror(err));
            return 1;
        }
    }
    while (atomic_load(&connected) < n) {
        usleep(100000);
        process_status(&threads, &rss, &hwm);
        if (threads > peak_threads) peak_threads = threads;
    }
    double start = now_seconds();
    printf("tpcc run: %d terminals connected in %.1fs (%ld failed)\n", n, start - t0, atomic_load(&connect_failures));
    fflush(stdout);
    if (atomic_load(&connect_failures)) return 1;
    window_begin = start + opt.ramp_seconds;
    window_end = window_begin + opt.seconds;
    pthread_mutex_lock(&go_lock);
    atomic_store(&go, 1);
    pthread_cond_broadcast(&go_cond);
    pthread_mutex_unlock(&go_lock);

    double cpu_begin = cpu_seconds(), cpu_end = 0, last_report = start, next_report = start + opt.report_every;
    long last_new_orders = 0, last_total = 0;
    int window_started = opt.ramp_seconds == 0;
    while (atomic_load(&finished) < n) {
        usleep(200000);
        double now = now_seconds();
        process_status(&threads, &rss, &hwm);
        if (threads > peak_threads) peak_threads = threads;
        if (!window_started && now >= window_begin) {
            cpu_begin = cpu_seconds();
            window_started = 1;
        }
        if (cpu_end == 0 && now >= window_end) cpu_end = cpu_seconds();
        if (now >= next_report && now < window_end + 1) {
            long no = atomic_load(&new_orders_total), total = atomic_load(&done_total);
            printf("tpcc run: %5.0fs  tpmC %8.1f  txn/s %7.1f  errors %ld  retries %ld  threads %ld  rss %ld MiB%s\n",
                   now - start, (no - last_new_orders) * 60 / (now - last_report), (total - last_total) / (now - last_report),
                   atomic_load(&errors), atomic_load(&retries), threads, rss / 1024, now < window_begin ? "  (ramp)" : "");
            fflush(stdout);
            last_new_orders = no;
            last_total = total;
            last_report = now;
            next_report += opt.report_every;
        }
    }
    if (cpu_end == 0) cpu_end = cpu_seconds();
    for (int i = 0; i < n; i++) pthread_join(terms[i].thread, NULL);
    process_status(&threads, &rss, &hwm);

    long total = 0;
    for (int t = 0; t < TYPES; t++) total += atomic_load(&done_in_window[t]);
    double tpmc = atomic_load(&done_in_window[NEW_ORDER]) * 60.0 / opt.seconds;
    double cpu_us_per_txn = total ? (cpu_end - cpu_begin) * 1e6 / total : 0;
    printf("tpcc run: tpmC %.1f (New-Orders completed per minute, the 1%% rolled back included)\n", tpmc);
    printf("tpcc run: %ld transactions, %.1f/s:", total, total / (double)opt.seconds);
    for (int t = 0; t < TYPES; t++)
        printf(" %s %.1f%%", type_name[t], total ? 100.0 * atomic_load(&done_in_window[t]) / total : 0);
    printf("\ntpcc run: response time ms (avg / p90 / p95):");
    for (int t = 0; t < TYPES; t++) {
        long k = atomic_load(&done_in_window[t]);
        printf(" %s %.1f/%.1f/%.1f", type_name[t], k ? sum_latency_s[t] * 1000 / k : 0, percentile_ms(t, 0.90),
               percentile_ms(t, 0.95));
    }
    printf("\ntpcc run: errors %ld, deadlock/lock-wait retries %ld, new-order rollbacks %ld\n", atomic_load(&errors),
           atomic_load(&retries), atomic_load(&user_rollbacks));
    printf("tpcc run: client CPU %.0f us/transaction, peak RSS %ld KiB, peak kernel threads %ld\n", cpu_us_per_txn, hwm,
           peak_threads);
    /* One line for scripts. */
    printf("RESULT tpmC=%.1f tps=%.1f p90_new_order_ms=%.1f p95_new_order_ms=%.1f cpu_us_per_txn=%.0f peak_rss_kib=%ld"
           " peak_threads=%ld errors=%ld retries=%ld terminals=%d\n",
           tpmc, total / (double)opt.seconds, percentile_ms(NEW_ORDER, 0.90), percentile_ms(NEW_ORDER, 0.95), cpu_us_per_txn,
           hwm, peak_threads, atomic_load(&errors), atomic_load(&retries), n);
    free(terms);
    return atomic_load(&errors) ? 1 : 0;
}
