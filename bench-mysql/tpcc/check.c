/* tpcc check: the consistency conditions 1-4 of clause 3.3.2, for every warehouse and
 * district, on a quiet database (after a run). Prints one line per condition and
 * "tpcc check: ok" when all hold; the exit status is 1 otherwise. */
#include "tpcc.h"

#include <stdlib.h>

/* Runs a query whose rows are violations; prints up to 5 of them and returns their count. */
static long violations(MYSQL *db, const char *name, const char *sql) {
    MYSQL_RES *res;
    if (db_select(db, &res, "%s", sql)) die_db(db, name);
    long n = res ? (long)mysql_num_rows(res) : 0;
    MYSQL_ROW row;
    for (int shown = 0; res && shown < 5 && (row = mysql_fetch_row(res)); shown++) {
        printf("  violation of %s:", name);
        for (unsigned i = 0; i < mysql_num_fields(res); i++) printf(" %s", row[i] ? row[i] : "NULL");
        printf("\n");
    }
    if (res) mysql_free_result(res);
    printf("tpcc check: %-60s %s (%ld violations)\n", name, n ? "FAILED" : "ok", n);
    return n;
}

int cmd_check(void) {
    MYSQL *db = db_connect(1);
    if (!db) return 1;
    double w;
    if (db_value(db, &w, "SELECT COUNT(*) FROM warehouse")) die_db(db, "count warehouses");
    if ((int)w != opt.warehouses) {
        printf("tpcc check: FAILED: %d warehouses in the database, -w %d\n", (int)w, opt.warehouses);
        return 1;
    }
    long bad = 0;
    bad += violations(db, "1: W_YTD = sum(D_YTD)",
                      "SELECT w_id, w_ytd, s FROM warehouse JOIN (SELECT d_w_id, SUM(d_ytd) s FROM district GROUP BY d_w_id) d"
                      " ON d_w_id = w_id WHERE w_ytd <> s");
    bad += violations(db, "2: D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)",
                      "SELECT d_w_id, d_id, d_next_o_id, mo, mno FROM district"
                      " JOIN (SELECT o_w_id, o_d_id, MAX(o_id) mo FROM orders GROUP BY o_w_id, o_d_id) o"
                      "   ON o_w_id = d_w_id AND o_d_id = d_id"
                      " LEFT JOIN (SELECT no_w_id, no_d_id, MAX(no_o_id) mno FROM new_orders GROUP BY no_w_id, no_d_id) n"
                      "   ON no_w_id = d_w_id AND no_d_id = d_id"
                      " WHERE d_next_o_id - 1 <> mo OR (mno IS NOT NULL AND mno <> mo)");
    bad += violations(db, "3: max(NO_O_ID) - min(NO_O_ID) + 1 = rows in NEW_ORDER",
                      "SELECT no_w_id, no_d_id, MAX(no_o_id), MIN(no_o_id), COUNT(*) FROM new_orders"
                      " GROUP BY no_w_id, no_d_id HAVING MAX(no_o_id) - MIN(no_o_id) + 1 <> COUNT(*)");
    bad += violations(db, "4: sum(O_OL_CNT) = rows in ORDER_LINE",
                      "SELECT o.o_w_id, o.o_d_id, s, n FROM"
                      " (SELECT o_w_id, o_d_id, SUM(o_ol_cnt) s FROM orders GROUP BY o_w_id, o_d_id) o"
                      " LEFT JOIN (SELECT ol_w_id, ol_d_id, COUNT(*) n FROM order_line GROUP BY ol_w_id, ol_d_id) l"
                      "   ON ol_w_id = o.o_w_id AND ol_d_id = o.o_d_id WHERE n IS NULL OR s <> n");
    double districts;
    if (db_value(db, &districts, "SELECT COUNT(*) FROM district")) die_db(db, "count districts");
    if ((int)districts != opt.warehouses * DIST_PER_WARE) {
        printf("tpcc check: FAILED: %d districts\n", (int)districts);
        bad++;
    }
    mysql_close(db);
    printf("tpcc check: %s\n", bad ? "FAILED" : "ok");
    return bad ? 1 : 0;
}
