/* vmtax-agent: command line, --list, and the sample loop.
 *
 *   vmtax-agent --list | --list-metrics | --env [--tmpdir DIR] | --version | --exit | --help
 *   vmtax-agent run NAME [--samples N] [--warmup N] [--min-time-ms MS]
 *                        [--iters N] [--max-sample-ms MS] [--parallel N]
 *                        [--cpu C] [--tmpdir DIR] [--inject PCT] [--count N]
 *                        [--count-settle-ms MS] [--tracepoint-id ID]
 *                        [--duration-ms MS] [--go] [--step] [--ref-steps N] [--trace-marks]
 *
 * --go holds the timed samples at a barrier: once set up and calibrated
 * (every instance, with --parallel), the agent prints a "ready" line and
 * reads one line from stdin; "go" starts them, anything else (or EOF) is an
 * error.  vmtax scale releases N agents in N targets at once this way.
 * --step holds every sample, warmups included, the same way: after the
 * "ready" line, each "go" line on stdin runs one sample and prints it, so
 * that vmtax can alternate the samples of processes in different targets
 * a millisecond apart (lockstep pairs; no reference loop around them).
 * A "warm" line before a go runs an untimed batch of the sample's
 * iterations first: the caches and TLB another process left cold are
 * refilled before the sample is timed, so that a sample costs the same
 * whether it follows one of its own or another process's (a quarter of a
 * sample's iterations left a lap of tlb_4k's 64 MiB cold: still 4-7%).
 * --duration-ms ends the timed samples at the first one that finishes that
 * long after the start (at least one): concurrent instances then measure
 * over the same stretch of time, whatever their speed (--samples caps them).
 * Its samples tile that time: each one's runs from the end of the one
 * before, the printing of that one's line included, so that a process kept
 * off its CPU between two batches (a host running more copies than CPUs
 * preempts it at any point) has that time counted too: ops over the sum of
 * the samples' times is its throughput over the wall-clock time.
 *
 * Output: one JSON object per line (schema 1), types "calibration",
 * "sample", "counting", "skip", "error" and a final "done".  With --count N,
 * after the timed samples, a "counting" line, a pause of --count-settle-ms
 * (the host's probe starts counting), then N samples marked "counting" that
 * carry counters per operation in "metrics" (counters.c).  Counters cost
 * time (8-14% on system calls and context switches here), so no timed
 * sample ever runs with one open.  --trace-marks puts a marker a
 * hypervisor's tracer sees (harness.h: trace_mark) right before and right
 * after each counted batch, and two more, an empty window, before the first:
 * what runs between two markers is the batch (vmtax's Xen probe counts the
 * hypercalls there, less the empty window's).
 *
 * Each timed sample carries "ref_ns": [before, after], the reference loop's
 * ns per step right before and right after it (harness.h: the host's state
 * it was taken in); --ref-steps 0 leaves it out, and so do tiled samples
 * (--duration-ms: nothing may run between them) and counted ones.
 */
#define _GNU_SOURCE
#include "harness.h"
#include "families.h"
#include "opts.h"
#include "counters.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static const char USAGE[] =
	"usage: vmtax-agent --list | --list-metrics | --env [--tmpdir DIR] | --version | --help\n"
	"       vmtax-agent run NAME [--samples N] [--warmup N] [--min-time-ms MS]\n"
	"                            [--iters N] [--max-sample-ms MS] [--parallel N]\n"
	"                            [--cpu C] [--tmpdir DIR] [--inject PCT] [--count N]\n"
	"                            [--count-settle-ms MS] [--tracepoint-id ID]\n"
	"                            [--duration-ms MS] [--go] [--step] [--ref-steps N] [--trace-marks]\n";

static void print_list(void)
{
	char line[4096], d[2048], r[512]; /* room for the longest description */
	emit_line("[\n");
	for (size_t i = 0; i < nbenches; i++) {
		const struct bench *b = &benches[i];
		json_escape(d, sizeof d, b->description);
		json_escape(r, sizeof r, b->requires);
		snprintf(line, sizeof line,
			 "{\"name\":\"%s\",\"suite\":\"%s\",\"unit\":\"%s\",\"direction\":\"%s\","
			 "\"description\":\"%s\",\"requires\":\"%s\"}%s\n",
			 b->name, b->suite, b->unit, b->direction, d, r, i + 1 < nbenches ? "," : "");
		emit_line(line);
	}
	emit_line("]\n");
}

static void emit_skip(const struct bench *b, const char *reason)
{
	char line[1024], esc[600];
	json_escape(esc, sizeof esc, reason);
	snprintf(line, sizeof line, "{\"schema\":%d,\"type\":\"skip\",\"bench\":\"%s\",\"reason\":\"%s\"}\n",
		 AGENT_SCHEMA, b->name, esc);
	emit_line(line);
}

static pid_t parent_pid; /* of --parallel instances */

static struct bctx new_ctx(const struct bench *b)
{
	return (struct bctx){.arg = b->arg, .arg2 = b->arg2, .ops_per_iter = 1};
}

/* --iters: estimate one iteration's time with a short untimed probe
 * (doubling batches up to about 1 ms, the reset hook included, as in
 * calibration) and refuse, exit 2, a sample longer than --max-sample-ms.
 * --max-sample-ms 0 skips it: vmtax passes the count its first process
 * calibrated, and saves the probe's ~2 ms in every later process. */
static void refuse_long_samples(const struct bench *b, struct bctx *c, const struct opts *o)
{
	uint64_t n = 1;
	struct batch r = time_batch(b, c, n);
	while (r.ns < 1000000 && n * 2 <= o->iters) {
		n *= 2;
		r = time_batch(b, c, n);
	}
	double per_iter_ns = (double)r.ns / (double)n;
	double sample_ms = per_iter_ns * (double)o->iters / 1e6 * (1 + o->inject_pct / 100);
	if (sample_ms <= (double)o->max_sample_ms)
		return;
	if (b->teardown)
		b->teardown(c);
	fprintf(stderr, "vmtax-agent: %s: a sample of %llu iterations would last about %.3g s "
		"(%.3g us each), more than --max-sample-ms %ld\n", b->name,
		(unsigned long long)o->iters, sample_ms / 1e3, per_iter_ns / 1e3, o->max_sample_ms);
	exit(2);
}

static void emit_calibration(const struct bench *b, const struct bctx *c, int inst,
			     uint64_t iters, double ovh)
{
	char line[1024];
	snprintf(line, sizeof line,
		 "{\"schema\":%d,\"type\":\"calibration\",\"bench\":\"%s\",\"instance\":%d,"
		 "\"iters\":%llu,\"ops_per_iter\":%llu,\"overhead\":%.4f,\"unit\":\"%s\"}\n",
		 AGENT_SCHEMA, b->name, inst, (unsigned long long)iters,
		 (unsigned long long)c->ops_per_iter, ovh, b->unit);
	emit_line(line);
}

static void emit_sample(const struct bench *b, const struct bctx *c, const struct opts *o,
			int inst, long seq, struct batch r, double ovh, const double *ref)
{
	char line[2048], inject[64] = "", refs[96] = "", metrics[1200] = ",\"counting\":true";
	double ops = (double)r.iters * (double)c->ops_per_iter;
	if (o->inject_pct > 0)
		snprintf(inject, sizeof inject, ",\"inject_pct\":%g", o->inject_pct);
	if (ref)
		snprintf(refs, sizeof refs, ",\"ref_ns\":[%.5g,%.5g]", ref[0], ref[1]);
	if (c->counting)
		counters_json(c->counting, ops, metrics + strlen(metrics), sizeof metrics - strlen(metrics));
	else
		metrics[0] = 0;
	snprintf(line, sizeof line,
		 "{\"schema\":%d,\"type\":\"sample\",\"bench\":\"%s\",\"unit\":\"%s\","
		 "\"instance\":%d,\"seq\":%ld,\"warmup\":%s,\"iters\":%llu,\"ops\":%.0f,"
		 "\"value\":%.6g,\"overhead\":%.4f,\"tsc_per_op\":%.6g,\"cpu\":%ld%s%s%s}\n",
		 AGENT_SCHEMA, b->name, b->unit, inst, seq, seq < o->warmup ? "true" : "false",
		 (unsigned long long)r.iters, ops, (double)r.ns / ops, ovh,
		 (double)r.tsc / ops, o->cpu, inject, refs, metrics);
	emit_line(line);
}

/* The counted batches come next: the host's probe may start counting. */
static void emit_counting(const struct bench *b, int inst)
{
	char line[256];
	snprintf(line, sizeof line, "{\"schema\":%d,\"type\":\"counting\",\"bench\":\"%s\",\"instance\":%d}\n",
		 AGENT_SCHEMA, b->name, inst);
	emit_line(line);
}

/* --parallel: report ready on `ready_fd`, then wait for `go_fd` to close. */
static void barrier(int ready_fd, int go_fd)
{
	char x = 'r';
	if (ready_fd >= 0) {
		if (write(ready_fd, &x, 1) != 1)
			die("barrier write: %s", strerror(errno));
		close(ready_fd);
	}
	if (go_fd >= 0) {
		while (read(go_fd, &x, 1) < 0 && errno == EINTR)
			;
		close(go_fd);
	}
}

/* One line from stdin, read a byte at a time so that nothing after it is
 * taken from a channel the agent shares with vmtax-shell; returns 1 for
 * the line "warm" where `warm_ok`, 0 for "go"; dies, naming `flag`, on EOF
 * or anything else. */
static int read_step_line(const char *flag, int warm_ok)
{
	char got[16];
	size_t n = 0;
	for (;;) {
		char c;
		ssize_t r = read(0, &c, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("%s: stdin closed before the go line", flag);
		if (c == '\n')
			break;
		if (c != '\r' && n < sizeof got - 1)
			got[n++] = c;
	}
	got[n] = 0;
	if (warm_ok && !strcmp(got, "warm"))
		return 1;
	if (strcmp(got, "go"))
		die("%s: expected the line 'go', got '%.15s'", flag, got);
	return 0;
}

static void read_go_line(const char *flag)
{
	read_step_line(flag, 0);
}

/* --step: the go of the next sample, after the untimed batch of each
 * "warm" line before it. */
static void await_step(const struct bench *b, struct bctx *c, uint64_t iters)
{
	while (read_step_line("--step", 1))
		(void)time_batch(b, c, iters);
}

static void emit_ready(const struct bench *b)
{
	char line[256];
	snprintf(line, sizeof line, "{\"schema\":%d,\"type\":\"ready\",\"bench\":\"%s\"}\n",
		 AGENT_SCHEMA, b->name);
	emit_line(line);
}

/* --go: say ready, then wait for the line "go" on stdin. */
static void await_go(const struct bench *b, const char *flag)
{
	emit_ready(b);
	read_go_line(flag);
}

/* Whether the timed samples are done: the last one ended --duration-ms or
 * more after the start (its end, not the clock after its line was written:
 * the samples, which tile the time, then always cover the duration). */
static int time_is_up(const struct opts *o, uint64_t start, uint64_t end, long s)
{
	return o->duration_ms > 0 && s >= o->warmup && end - start >= (uint64_t)o->duration_ms * 1000000ull;
}

/* One instance: setup, calibrate, warm up, sample, tear down.  Waits on
 * `go_fd` (if >= 0) after calibration so --parallel instances start together. */
static int run_instance(const struct bench *b, const struct opts *o, int inst,
			int ready_fd, int go_fd)
{
	struct bctx c = new_ctx(b);
	struct counters k;
	if (o->cpu >= 0)
		pin_to_cpu((int)o->cpu);
	/* Before setup, so that what it starts inherits them; only in a process
	 * that counts: an open counter, even disabled, may cost time. */
	counters_open(&k, o->count > 0);
	if (b->setup && b->setup(&c) != 0) {
		if (inst == 0)
			emit_skip(b, c.skip[0] ? c.skip : "setup declined");
		if (ready_fd >= 0)
			close(ready_fd);
		counters_close(&k);
		return 0;
	}
	if (o->probe)
		refuse_long_samples(b, &c, o);
	uint64_t iters = o->iters ? o->iters : calibrate(b, &c, (uint64_t)o->min_time_ms * 1000000ull);
	c.inject_frac = o->inject_pct / 100; /* the timed batches only: not the calibration */
	if (c.inject_frac > 0)
		inject_setup();
	double ovh = overhead_ns(iters) / (double)c.ops_per_iter;
	emit_calibration(b, &c, inst, iters, ovh);
	barrier(ready_fd, go_fd);
	if (o->step && ready_fd < 0 && go_fd < 0) { /* one instance: its own barrier (--parallel: the parent's) */
		emit_ready(b);
		await_step(b, &c, iters);
	} else if (o->go && ready_fd < 0 && go_fd < 0) {
		await_go(b, "--go");
	}
	uint64_t start = now_ns(), prev = start, prev_tsc = rdtsc();
	long s = 0;
	int with_ref = o->ref_steps > 0 && o->duration_ms == 0 && !o->step;
	while (s < o->warmup + o->samples) {
		double ref[2] = {0, 0};
		if (o->step && s > 0)
			await_step(b, &c, iters); /* the first sample's go was the barrier's */
		if (with_ref)
			ref[0] = reference_ns((uint64_t)o->ref_steps);
		struct batch r = time_batch(b, &c, iters);
		if (with_ref)
			ref[1] = reference_ns((uint64_t)o->ref_steps);
		if (o->duration_ms > 0) { /* tiled: from the end of the one before */
			uint64_t t = now_ns(), tsc = rdtsc();
			r.ns = t - prev;
			r.tsc = tsc - prev_tsc;
			prev = t;
			prev_tsc = tsc;
		}
		emit_sample(b, &c, o, inst, s, r, ovh, with_ref ? ref : NULL);
		if (time_is_up(o, start, prev, s++))
			break;
	}
	if (o->count > 0) {
		emit_counting(b, inst);
		if (o->count_settle_ms > 0)
			usleep((useconds_t)o->count_settle_ms * 1000);
		c.counting = &k;
		c.marks = o->trace_marks;
		if (c.marks) { /* an empty window first: what the markers cost, taken from each batch's */
			trace_mark();
			trace_mark();
		}
		for (long n = 0; n < o->count; n++, s++)
			emit_sample(b, &c, o, inst, s, time_batch(b, &c, iters), ovh, NULL);
		c.counting = NULL;
	}
	if (b->teardown)
		b->teardown(&c);
	counters_close(&k);
	return 0;
}

/* Before --parallel instances start: the sample-length check, once, in a
 * setup of the parent's own, so that a refusal is one line and exit 2. */
static void probe_in_parent(const struct bench *b, struct opts *o)
{
	struct bctx c = new_ctx(b);
	if (!o->probe || (b->setup && b->setup(&c) != 0))
		return;
	refuse_long_samples(b, &c, o);
	if (b->teardown)
		b->teardown(&c);
	o->probe = 0;
}

/* A --parallel instance: ends (and cleans up, see tmpdir.c) with its parent. */
static int run_child(const struct bench *b, const struct opts *o, int inst, int ready_fd, int go_fd)
{
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent_pid)
		return 1;
	int rc = run_instance(b, o, inst, ready_fd, go_fd);
	private_dir_remove(); /* _exit() skips the exit hook */
	return rc;
}

static int run_parallel(const struct bench *b, struct opts *o)
{
	int ready[2], go[2];
	pid_t pids[256];
	probe_in_parent(b, o);
	parent_pid = getpid();
	if (pipe(ready) || pipe(go))
		die("pipe: %s", strerror(errno));
	for (long i = 0; i < o->parallel; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			die("fork: %s", strerror(errno));
		if (pids[i] == 0) {
			close(ready[0]);
			close(go[1]);
			_exit(run_child(b, o, (int)i, ready[1], go[0]));
		}
	}
	close(ready[1]);
	close(go[0]);
	char x;
	while (read(ready[0], &x, 1) > 0) /* every instance ready (or skipped) */
		;
	if (o->go)
		await_go(b, "--go");
	close(go[1]); /* release them all at once */
	int bad = 0;
	for (long i = 0; i < o->parallel; i++) {
		int st;
		if (waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad = 1;
	}
	if (bad)
		die("an instance of %s failed", b->name);
	return 0;
}

static const struct bench *find_bench(const char *name)
{
	for (size_t i = 0; i < nbenches; i++)
		if (strcmp(benches[i].name, name) == 0)
			return &benches[i];
	usage_error("unknown benchmark '%.40s' (see --list)", name);
}

static void check_iters_cap(const struct bench *b, const struct opts *o)
{
	if (b->max_iters && o->iters > b->max_iters)
		usage_error("%s runs at most %llu iterations per sample, got --iters %llu", b->name,
			    (unsigned long long)b->max_iters, (unsigned long long)o->iters);
}

static int run_command(int argc, char **argv)
{
	const struct bench *b = find_bench(argv[2]);
	struct opts o = {.samples = 5, .warmup = 1, .min_time_ms = 10, .parallel = 1, .cpu = -1,
			 .max_sample_ms = 60000, .ref_steps = REF_STEPS};
	parse_run_opts(argc, argv, &o);
	check_iters_cap(b, &o);
	setvbuf(stdout, NULL, _IONBF, 0);
	if (o.parallel > 1)
		run_parallel(b, &o);
	else
		run_instance(b, &o, 0, -1, -1);
	char line[256];
	snprintf(line, sizeof line, "{\"schema\":%d,\"type\":\"done\",\"bench\":\"%s\"}\n",
		 AGENT_SCHEMA, b->name);
	emit_line(line);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage_error("no command given (see --help)");
	if (!strcmp(argv[1], "--exit"))
		return 0;
	if (!strcmp(argv[1], "--help")) {
		fputs(USAGE, stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--list")) {
		print_list();
		return 0;
	}
	if (!strcmp(argv[1], "--list-metrics")) {
		/* the names the sample lines' "metrics" can carry: vmtax checks them against its registry */
		char names[1024], line[1200];
		if (!counters_names_json(names, sizeof names))
			return 1;
		snprintf(line, sizeof line, "{\"schema\":%d,\"type\":\"metrics\",\"names\":%s}\n", AGENT_SCHEMA,
			 names);
		emit_line(line);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("vmtax-agent %s (schema %d)\n", AGENT_VERSION, AGENT_SCHEMA);
		return 0;
	}
	if (!strcmp(argv[1], "--env")) {
		parse_env_opts(argc, argv);
		print_env();
		return 0;
	}
	if (!strcmp(argv[1], "run")) {
		if (argc < 3)
			usage_error("run needs a benchmark name (see --list)");
		return run_command(argc, argv);
	}
	usage_error("unknown command '%.40s' (see --help)", argv[1]);
}
