/* Counters around every timed batch (see counters.c): per operation, what
 * the target's own kernel saw -- perf events where it has them, getrusage
 * always. */
#ifndef VMTAX_COUNTERS_H
#define VMTAX_COUNTERS_H
#include <stddef.h>

#define NCOUNTERS 11 /* perf events: the table in counters.c */
#define NRUSAGE 4    /* cpu_user_ns, cpu_sys_ns, page_faults, context_switches */

struct counters {
	int enabled;           /* 0: --no-counters */
	int fd[NCOUNTERS];     /* -1: not available, why[] says why */
	char why[NCOUNTERS][96];
	double v0[NCOUNTERS], delta[NCOUNTERS];
	double ru0[NRUSAGE], ru_delta[NRUSAGE];
};

/* Before the benchmark's setup, so that what it starts inherits them. */
void counters_open(struct counters *k, int enabled);
void counters_close(struct counters *k);
/* Right before a batch's clock starts, right after it stops (untimed). */
void counters_start(struct counters *k);
void counters_stop(struct counters *k);
/* `,"metrics":{...}` per operation, for a sample line; 0 when nothing. */
size_t counters_json(const struct counters *k, double ops, char *buf, size_t cap);
/* Where counter i comes from: "perf", "getrusage (...)" or "not counted: why". */
const char *counters_source(const struct counters *k, int i, char *buf, size_t cap);
const char *counter_name(int i);
/* Every name a sample line's "metrics" can carry, as a JSON array (--list-metrics). */
size_t counters_names_json(char *buf, size_t cap);
extern long tracepoint_id; /* --tracepoint-id ID (-1: read tracefs) */
#endif
