/* tpcc: a TPC-C client on libmariadb, one pthread per terminal.
 *
 *   tpcc load  -w N [-j JOBS]                     schema + initial population
 *   tpcc run   -w N -t TERMINALS -d SECONDS [--no-wait] [--ramp S] [--wait-scale F] [--report S]
 *   tpcc check -w N                               consistency conditions 1-4
 *
 * Connection options for all: -H host (127.0.0.1) -P port (3306) -u user (root)
 * -p password ("") -D database (tpcc). This file: the command line, dispatched to
 * load.c, run.c and check.c, which do the three commands on db.c (options, connection
 * and statement helpers) and input.c (random input of clause 2.1.6 / 4.3.2). */
#define _GNU_SOURCE
#include "tpcc.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

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
