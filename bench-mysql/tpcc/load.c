/* tpcc load: drops and creates the database, creates the nine tables (clause 1.3) and
 * fills them as clause 4.3.3.1 describes, for opt.warehouses warehouses. The work is cut
 * into units (the items; per warehouse its row, districts and stock; per district its
 * customers with their history, and its orders with their lines and new-orders) that
 * opt.jobs threads take from a counter; each unit sends multi-row INSERTs of a few
 * hundred KiB. A progress line every few seconds. */
#define _GNU_SOURCE
#include "tpcc.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *schema[] = {
    "CREATE TABLE warehouse (w_id INT NOT NULL, w_name VARCHAR(10), w_street_1 VARCHAR(20), w_street_2 VARCHAR(20),"
    " w_city VARCHAR(20), w_state CHAR(2), w_zip CHAR(9), w_tax DECIMAL(4,4), w_ytd DECIMAL(12,2), PRIMARY KEY (w_id))",
    "CREATE TABLE district (d_id TINYINT NOT NULL, d_w_id INT NOT NULL, d_name VARCHAR(10), d_street_1 VARCHAR(20),"
    " d_street_2 VARCHAR(20), d_city VARCHAR(20), d_state CHAR(2), d_zip CHAR(9), d_tax DECIMAL(4,4),"
    " d_ytd DECIMAL(12,2), d_next_o_id INT, PRIMARY KEY (d_w_id, d_id))",
    "CREATE TABLE customer (c_id INT NOT NULL, c_d_id TINYINT NOT NULL, c_w_id INT NOT NULL, c_first VARCHAR(16),"
    " c_middle CHAR(2), c_last VARCHAR(16), c_street_1 VARCHAR(20), c_street_2 VARCHAR(20), c_city VARCHAR(20),"
    " c_state CHAR(2), c_zip CHAR(9), c_phone CHAR(16), c_since DATETIME, c_credit CHAR(2), c_credit_lim DECIMAL(12,2),"
    " c_discount DECIMAL(4,4), c_balance DECIMAL(12,2), c_ytd_payment DECIMAL(12,2), c_payment_cnt INT,"
    " c_delivery_cnt INT, c_data VARCHAR(500), PRIMARY KEY (c_w_id, c_d_id, c_id),"
    " KEY idx_customer_name (c_w_id, c_d_id, c_last, c_first))",
    "CREATE TABLE history (h_c_id INT, h_c_d_id TINYINT, h_c_w_id INT, h_d_id TINYINT, h_w_id INT, h_date DATETIME,"
    " h_amount DECIMAL(6,2), h_data VARCHAR(24))",
    "CREATE TABLE new_orders (no_o_id INT NOT NULL, no_d_id TINYINT NOT NULL, no_w_id INT NOT NULL,"
    " PRIMARY KEY (no_w_id, no_d_id, no_o_id))",
    "CREATE TABLE orders (o_id INT NOT NULL, o_d_id TINYINT NOT NULL, o_w_id INT NOT NULL, o_c_id INT,"
    " o_entry_d DATETIME, o_carrier_id TINYINT, o_ol_cnt TINYINT, o_all_local TINYINT,"
    " PRIMARY KEY (o_w_id, o_d_id, o_id), KEY idx_orders_customer (o_w_id, o_d_id, o_c_id, o_id))",
    "CREATE TABLE order_line (ol_o_id INT NOT NULL, ol_d_id TINYINT NOT NULL, ol_w_id INT NOT NULL,"
    " ol_number TINYINT NOT NULL, ol_i_id INT, ol_supply_w_id INT, ol_delivery_d DATETIME, ol_quantity TINYINT,"
    " ol_amount DECIMAL(6,2), ol_dist_info CHAR(24), PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number))",
    "CREATE TABLE item (i_id INT NOT NULL, i_im_id INT, i_name VARCHAR(24), i_price DECIMAL(5,2), i_data VARCHAR(50),"
    " PRIMARY KEY (i_id))",
    "CREATE TABLE stock (s_i_id INT NOT NULL, s_w_id INT NOT NULL, s_quantity SMALLINT, s_dist_01 CHAR(24),"
    " s_dist_02 CHAR(24), s_dist_03 CHAR(24), s_dist_04 CHAR(24), s_dist_05 CHAR(24), s_dist_06 CHAR(24),"
    " s_dist_07 CHAR(24), s_dist_08 CHAR(24), s_dist_09 CHAR(24), s_dist_10 CHAR(24), s_ytd INT, s_order_cnt SMALLINT,"
    " s_remote_cnt SMALLINT, s_data VARCHAR(50), PRIMARY KEY (s_w_id, s_i_id))",
};

/* A multi-row INSERT being built: rows are appended until the statement is large. */
struct batch {
    MYSQL *db;
    const char *head; /* "INSERT INTO t VALUES " */
    char *sql;
    size_t len, cap;
    int rows;
};
static atomic_long rows_loaded;

static void batch_flush(struct batch *b) {
    if (!b->rows) return;
    if (mysql_real_query(b->db, b->sql, b->len)) die_db(b->db, b->head);
    atomic_fetch_add(&rows_loaded, b->rows);
    b->rows = 0;
}

static void batch_row(struct batch *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void batch_row(struct batch *b, const char *fmt, ...) {
    if (b->rows == 0) b->len = (size_t)sprintf(b->sql, "%s", b->head);
    else b->sql[b->len++] = ',';
    va_list ap;
    va_start(ap, fmt);
    b->len += (size_t)vsnprintf(b->sql + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (++b->rows >= 1000 || b->len > b->cap - 4096) batch_flush(b);
}

static void batch_start(struct batch *b, MYSQL *db, const char *head) {
    b->db = db;
    b->head = head;
    b->rows = 0;
    if (!b->sql) {
        b->cap = 512 * 1024;
        b->sql = malloc(b->cap);
    }
}

/* s_data / i_data: 26..50 characters, 10 % of them with "ORIGINAL" somewhere inside. */
static void data_with_original(struct rng *r, char *out) {
    int n = rand_astring(r, out, 26, 50);
    if (rand_int(r, 1, 10) == 1) memcpy(out + rand_int(r, 0, n - 8), "ORIGINAL", 8);
}

static void load_items(MYSQL *db, struct rng *r, struct batch *b) {
    char name[32], data[64];
    batch_start(b, db, "INSERT INTO item VALUES ");
    for (int i = 1; i <= ITEMS; i++) {
        rand_astring(r, name, 14, 24);
        data_with_original(r, data);
        batch_row(b, "(%d,%d,'%s',%d.%02d,'%s')", i, rand_int(r, 1, 10000), name, rand_int(r, 1, 99), rand_int(r, 0, 99),
                  data);
    }
    batch_flush(b);
}

static void address(struct rng *r, char *out) { /* street_1, street_2, city, state, zip as SQL values */
    char s1[24], s2[24], city[24], state[4], zip[12];
    rand_astring(r, s1, 10, 20);
    rand_astring(r, s2, 10, 20);
    rand_astring(r, city, 10, 20);
    rand_astring(r, state, 2, 2);
    rand_nstring(r, zip, 4, 4);
    sprintf(out, "'%s','%s','%s','%s','%s11111'", s1, s2, city, state, zip);
}

static void load_warehouse(MYSQL *db, struct rng *r, struct batch *b, int w) {
    char name[16], addr[128], dist[10][32], data[64];
    rand_astring(r, name, 6, 10);
    address(r, addr);
    if (db_exec(db, "INSERT INTO warehouse VALUES (%d,'%s',%s,0.%04d,300000.00)", w, name, addr, rand_int(r, 0, 2000)))
        die_db(db, "insert warehouse");
    batch_start(b, db, "INSERT INTO district VALUES ");
    for (int d = 1; d <= DIST_PER_WARE; d++) {
        rand_astring(r, name, 6, 10);
        address(r, addr);
        batch_row(b, "(%d,%d,'%s',%s,0.%04d,30000.00,%d)", d, w, name, addr, rand_int(r, 0, 2000), ORD_PER_DIST + 1);
    }
    batch_flush(b);
    batch_start(b, db, "INSERT INTO stock VALUES ");
    for (int i = 1; i <= ITEMS; i++) {
        for (int d = 0; d < 10; d++) rand_astring(r, dist[d], 24, 24);
        data_with_original(r, data);
        batch_row(b, "(%d,%d,%d,'%s','%s','%s','%s','%s','%s','%s','%s','%s','%s',0,0,0,'%s')", i, w, rand_int(r, 10, 100),
                  dist[0], dist[1], dist[2], dist[3], dist[4], dist[5], dist[6], dist[7], dist[8], dist[9], data);
    }
    batch_flush(b);
}

static void load_customers(MYSQL *db, struct rng *r, struct batch *b, int w, int d) {
    char first[24], last[16], addr[128], phone[20], data[512], hdata[32];
    batch_start(b, db, "INSERT INTO customer VALUES ");
    for (int c = 1; c <= CUST_PER_DIST; c++) {
        rand_astring(r, first, 8, 16);
        /* The first 1000 customers get each last name once; the others NURand(255) with C_LOAD. */
        int num = c <= 1000 ? c - 1 : (((rand_int(r, 0, 255) | rand_int(r, 0, 999)) + C_LAST_LOAD) % 1000);
        last_name(num, last);
        address(r, addr);
        rand_nstring(r, phone, 16, 16);
        rand_astring(r, data, 300, 500);
        batch_row(b, "(%d,%d,%d,'%s','OE','%s',%s,'%s',NOW(),'%s',50000.00,0.%04d,-10.00,10.00,1,0,'%s')", c, d, w, first,
                  last, addr, phone, rand_int(r, 1, 10) == 1 ? "BC" : "GC", rand_int(r, 0, 5000), data);
    }
    batch_flush(b);
    batch_start(b, db, "INSERT INTO history VALUES ");
    for (int c = 1; c <= CUST_PER_DIST; c++) {
        rand_astring(r, hdata, 12, 24);
        batch_row(b, "(%d,%d,%d,%d,%d,NOW(),10.00,'%s')", c, d, w, d, w, hdata);
    }
    batch_flush(b);
}

static void load_orders(MYSQL *db, struct rng *r, struct batch *b, struct batch *lines, int w, int d) {
    static __thread int perm[CUST_PER_DIST];
    for (int i = 0; i < CUST_PER_DIST; i++) perm[i] = i + 1;
    for (int i = CUST_PER_DIST - 1; i > 0; i--) { /* o_c_id: a random permutation of the customers */
        int j = rand_int(r, 0, i), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    char info[32];
    batch_start(b, db, "INSERT INTO orders VALUES ");
    batch_start(lines, db, "INSERT INTO order_line VALUES ");
    for (int o = 1; o <= ORD_PER_DIST; o++) {
        int delivered = o < FIRST_UNDELIVERED, ol_cnt = rand_int(r, 5, 15);
        char carrier[8];
        if (delivered) sprintf(carrier, "%d", rand_int(r, 1, 10));
        else strcpy(carrier, "NULL");
        batch_row(b, "(%d,%d,%d,%d,NOW(),%s,%d,1)", o, d, w, perm[o - 1], carrier, ol_cnt);
        for (int l = 1; l <= ol_cnt; l++) {
            rand_astring(r, info, 24, 24);
            if (delivered)
                batch_row(lines, "(%d,%d,%d,%d,%d,%d,NOW(),5,0.00,'%s')", o, d, w, l, rand_int(r, 1, ITEMS), w, info);
            else
                batch_row(lines, "(%d,%d,%d,%d,%d,%d,NULL,5,%d.%02d,'%s')", o, d, w, l, rand_int(r, 1, ITEMS), w,
                          rand_int(r, 0, 9999), rand_int(r, 0, 99), info);
        }
    }
    batch_flush(b);
    batch_flush(lines);
    batch_start(b, db, "INSERT INTO new_orders VALUES ");
    for (int o = FIRST_UNDELIVERED; o <= ORD_PER_DIST; o++) batch_row(b, "(%d,%d,%d)", o, d, w);
    batch_flush(b);
}

/* Units: 0 = items; then per warehouse 1 + 2 * DIST_PER_WARE (warehouse+stock, customers of d, orders of d). */
static atomic_int next_unit, units_done;
static int unit_count;

static void *loader(void *arg) {
    (void)arg;
    mysql_thread_init();
    MYSQL *db = db_connect(1);
    if (!db) exit(1);
    if (db_exec(db, "SET unique_checks=0, foreign_key_checks=0, autocommit=1")) die_db(db, "session settings");
    struct batch b = {0}, lines = {0};
    struct rng r;
    for (int u; (u = atomic_fetch_add(&next_unit, 1)) < unit_count;) {
        rng_seed(&r, (uint64_t)u + 1);
        if (u == 0) {
            load_items(db, &r, &b);
        } else {
            int w = (u - 1) / (1 + 2 * DIST_PER_WARE) + 1, k = (u - 1) % (1 + 2 * DIST_PER_WARE);
            if (k == 0) load_warehouse(db, &r, &b, w);
            else if (k <= DIST_PER_WARE) load_customers(db, &r, &b, w, k);
            else load_orders(db, &r, &b, &lines, w, k - DIST_PER_WARE);
        }
        atomic_fetch_add(&units_done, 1);
    }
    free(b.sql);
    free(lines.sql);
    mysql_close(db);
    mysql_thread_end();
    return NULL;
}

int cmd_load(void) {
    MYSQL *db = db_connect(0);
    if (!db) return 1;
    if (db_exec(db, "DROP DATABASE IF EXISTS %s", opt.database) || db_exec(db, "CREATE DATABASE %s", opt.database) ||
        mysql_select_db(db, opt.database))
        die_db(db, "create database");
    for (size_t i = 0; i < sizeof schema / sizeof *schema; i++)
        if (db_exec(db, "%s", schema[i])) die_db(db, schema[i]);
    mysql_close(db);

    unit_count = 1 + opt.warehouses * (1 + 2 * DIST_PER_WARE);
    int jobs = opt.jobs < unit_count ? opt.jobs : unit_count;
    long expected = ITEMS + (long)opt.warehouses * (1 + DIST_PER_WARE + ITEMS +
                                                     DIST_PER_WARE * (2L * CUST_PER_DIST + ORD_PER_DIST * 11L + 900));
    printf("tpcc load: %d warehouses, %d units of work, %d jobs, ~%ld rows\n", opt.warehouses, unit_count, jobs, expected);
    fflush(stdout);
    double start = now_seconds();
    pthread_t *threads = calloc((size_t)jobs, sizeof *threads);
    for (int i = 0; i < jobs; i++) pthread_create(&threads[i], NULL, loader, NULL);
    while (atomic_load(&units_done) < unit_count) {
        for (int i = 0; i < 20 && atomic_load(&units_done) < unit_count; i++) usleep(100000);
        long rows = atomic_load(&rows_loaded);
        printf("tpcc load: %4.0fs  units %d/%d  rows %ld (%.0f%%)  %.0f rows/s\n", now_seconds() - start,
               atomic_load(&units_done), unit_count, rows, 100.0 * rows / expected, rows / (now_seconds() - start));
        fflush(stdout);
    }
    for (int i = 0; i < jobs; i++) pthread_join(threads[i], NULL);
    free(threads);
    /* Fresh statistics for the optimizer. InnoDB recomputes a table's persistent
     * statistics in the background once a tenth of its rows changed; a server stopped soon
     * after the load (as a cached datadir's is) may keep those of the empty tables, and
     * TPC-C's joins and range scans planned on them run several times slower
     * (docs/RESULTS.md#tpcc-datadir-statistics). */
    db = db_connect(1);
    if (!db) return 1;
    if (db_exec(db, "ANALYZE TABLE warehouse, district, customer, history, new_orders, orders, order_line, item, stock"))
        die_db(db, "analyze table");
    mysql_close(db);
    printf("tpcc load: done, %ld rows in %.1fs (tables analyzed)\n", atomic_load(&rows_loaded), now_seconds() - start);
    return 0;
}
