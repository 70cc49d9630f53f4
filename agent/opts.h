/* The command line of `vmtax-agent run` and `--env`: parsed and checked
 * here, so that everything past it may trust its options.  Every problem is
 * one line on stderr and exit status 2. */
#ifndef VMTAX_OPTS_H
#define VMTAX_OPTS_H
#include <stdint.h>

struct opts {
	long samples, warmup, min_time_ms, parallel, cpu, max_sample_ms;
	uint64_t iters;      /* 0: calibrate */
	double inject_pct;   /* 0: none */
	int probe;           /* with --iters: check the sample length (see main.c) */
	long count;          /* --count: batches with counters after the timed samples */
	long count_settle_ms; /* --count-settle-ms: pause before them (the host's probe starts) */
	long duration_ms;    /* --duration-ms: timed samples until this long after the start */
	int go;              /* --go: after calibration, say ready and wait for "go" on stdin */
	int step;            /* --step: that, and a "go" line before every later sample too */
	long ref_steps;      /* --ref-steps: the reference's length around each timed sample (0: none) */
	int trace_marks;     /* --trace-marks: each counted batch between two markers a hypervisor's tracer sees */
};

void parse_run_opts(int argc, char **argv, struct opts *o);
void parse_env_opts(int argc, char **argv); /* --env [--tmpdir DIR] */
void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
#endif
