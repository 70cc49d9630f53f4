/* vmtax-agent: command line, --list, and the sample loop.
 *
 *   vmtax-agent --list | --env | --version | --exit
 *   vmtax-agent run NAME [--samples N] [--warmup N] [--min-time-ms MS]
 *                        [--iters N] [--parallel N] [--cpu C] [--tmpdir DIR]
 *
 * Output: one JSON object per line (schema 1), types "calibration",
 * "sample", "skip", "error" and a final "done".
 */
#define _GNU_SOURCE
#include "harness.h"
#include "families.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct opts {
	const char *name;
	long samples, warmup, min_time_ms, parallel, cpu;
	uint64_t iters;
};

static void usage(void)
{
	fprintf(stderr,
		"usage: vmtax-agent --list | --env | --version\n"
		"       vmtax-agent run NAME [--samples N] [--warmup N] [--min-time-ms MS]\n"
		"                            [--iters N] [--parallel N] [--cpu C] [--tmpdir DIR]\n");
	exit(2);
}

static long num_arg(const char *flag, const char *v, long lo, long hi)
{
	char *end;
	errno = 0;
	long n = v ? strtol(v, &end, 10) : 0;
	if (!v || errno || *end || n < lo || n > hi) {
		fprintf(stderr, "vmtax-agent: %s needs an integer in [%ld, %ld], got '%s'\n",
			flag, lo, hi, v ? v : "");
		exit(2);
	}
	return n;
}

static void print_list(void)
{
	char line[2048], d[1024], r[512];
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

static const struct bench *find(const char *name)
{
	for (size_t i = 0; i < nbenches; i++)
		if (strcmp(benches[i].name, name) == 0)
			return &benches[i];
	return NULL;
}

static void emit_skip(const struct bench *b, const char *reason)
{
	char line[1024], esc[600];
	json_escape(esc, sizeof esc, reason);
	snprintf(line, sizeof line, "{\"schema\":%d,\"type\":\"skip\",\"bench\":\"%s\",\"reason\":\"%s\"}\n",
		 AGENT_SCHEMA, b->name, esc);
	emit_line(line);
}

/* One instance: setup, calibrate, warm up, sample, tear down.  Waits on
 * `go_fd` (if >= 0) after calibration so --parallel instances start together. */
static int run_instance(const struct bench *b, const struct opts *o, int inst,
			int ready_fd, int go_fd)
{
	struct bctx c = {.arg = b->arg, .arg2 = b->arg2, .ops_per_iter = 1};
	char line[1024];
	if (o->cpu >= 0)
		pin_to_cpu((int)o->cpu);
	if (b->setup && b->setup(&c) != 0) {
		if (inst == 0)
			emit_skip(b, c.skip[0] ? c.skip : "setup declined");
		if (ready_fd >= 0)
			close(ready_fd);
		return 0;
	}
	uint64_t iters = o->iters ? o->iters : calibrate(b, &c, (uint64_t)o->min_time_ms * 1000000ull);
	double ovh = overhead_ns(iters) / (double)c.ops_per_iter;
	snprintf(line, sizeof line,
		 "{\"schema\":%d,\"type\":\"calibration\",\"bench\":\"%s\",\"instance\":%d,"
		 "\"iters\":%llu,\"ops_per_iter\":%llu,\"overhead\":%.4f,\"unit\":\"%s\"}\n",
		 AGENT_SCHEMA, b->name, inst, (unsigned long long)iters,
		 (unsigned long long)c.ops_per_iter, ovh, b->unit);
	emit_line(line);
	if (ready_fd >= 0) {
		char x = 'r';
		if (write(ready_fd, &x, 1) != 1)
			die("barrier write: %s", strerror(errno));
		close(ready_fd);
	}
	if (go_fd >= 0) {
		char x;
		while (read(go_fd, &x, 1) < 0 && errno == EINTR)
			;
		close(go_fd);
	}
	for (long s = 0; s < o->warmup + o->samples; s++) {
		struct batch r = time_batch(b, &c, iters);
		double ops = (double)r.iters * (double)c.ops_per_iter;
		snprintf(line, sizeof line,
			 "{\"schema\":%d,\"type\":\"sample\",\"bench\":\"%s\",\"unit\":\"%s\","
			 "\"instance\":%d,\"seq\":%ld,\"warmup\":%s,\"iters\":%llu,\"ops\":%.0f,"
			 "\"value\":%.6g,\"overhead\":%.4f,\"tsc_per_op\":%.6g,\"cpu\":%ld}\n",
			 AGENT_SCHEMA, b->name, b->unit, inst, s, s < o->warmup ? "true" : "false",
			 (unsigned long long)r.iters, ops, (double)r.ns / ops, ovh,
			 (double)r.tsc / ops, o->cpu);
		emit_line(line);
	}
	if (b->teardown)
		b->teardown(&c);
	return 0;
}

static int run_parallel(const struct bench *b, const struct opts *o)
{
	int ready[2], go[2];
	pid_t pids[256];
	if (pipe(ready) || pipe(go))
		die("pipe: %s", strerror(errno));
	for (long i = 0; i < o->parallel; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			die("fork: %s", strerror(errno));
		if (pids[i] == 0) {
			close(ready[0]);
			close(go[1]);
			_exit(run_instance(b, o, (int)i, ready[1], go[0]));
		}
	}
	close(ready[1]);
	close(go[0]);
	char x;
	while (read(ready[0], &x, 1) > 0) /* every instance ready (or skipped) */
		;
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

int main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	if (!strcmp(argv[1], "--exit"))
		return 0;
	if (!strcmp(argv[1], "--list")) {
		print_list();
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("vmtax-agent %s (schema %d)\n", AGENT_VERSION, AGENT_SCHEMA);
		return 0;
	}
	if (!strcmp(argv[1], "--env")) {
		print_env();
		return 0;
	}
	if (strcmp(argv[1], "run") || argc < 3)
		usage();
	struct opts o = {.name = argv[2], .samples = 5, .warmup = 1,
			 .min_time_ms = 10, .parallel = 1, .cpu = -1};
	for (int i = 3; i < argc; i++) {
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(f, "--samples")) o.samples = num_arg(f, v, 1, 1000000);
		else if (!strcmp(f, "--warmup")) o.warmup = num_arg(f, v, 0, 1000000);
		else if (!strcmp(f, "--min-time-ms")) o.min_time_ms = num_arg(f, v, 0, 3600000);
		else if (!strcmp(f, "--iters")) o.iters = (uint64_t)num_arg(f, v, 1, 1L << 40);
		else if (!strcmp(f, "--parallel")) o.parallel = num_arg(f, v, 1, 256);
		else if (!strcmp(f, "--cpu")) o.cpu = num_arg(f, v, 0, 4095);
		else if (!strcmp(f, "--tmpdir") && v) tmpdir_path = v;
		else {
			fprintf(stderr, "vmtax-agent: unknown option '%s'\n", f);
			usage();
		}
		i++;
	}
	const struct bench *b = find(o.name);
	if (!b) {
		fprintf(stderr, "vmtax-agent: unknown benchmark '%s' (see --list)\n", o.name);
		return 2;
	}
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
