/* Command-line options: ranges, the CPU, the temporary directory. */
#define _GNU_SOURCE
#include "opts.h"
#include "counters.h"
#include "harness.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void usage_error(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fprintf(stderr, "vmtax-agent: %s\n", msg);
	exit(2);
}

/* A decimal integer in [lo, hi]: digits only, no sign, space or suffix. */
static long num_arg(const char *flag, const char *v, long lo, long hi)
{
	char *end;
	long n = 0;
	errno = 0;
	if (v && *v >= '0' && *v <= '9')
		n = strtol(v, &end, 10);
	if (!v || *v < '0' || *v > '9' || errno || *end || n < lo || n > hi)
		usage_error("%s needs an integer in [%ld, %ld], got '%.40s'", flag, lo, hi, v ? v : "");
	return n;
}

/* A plain decimal number (digits, at most one point) in (lo, hi]. */
static double pct_arg(const char *flag, const char *v, double lo, double hi)
{
	const char *dot = v ? strchr(v, '.') : NULL;
	int plain = v && v[strspn(v, "0123456789.")] == 0 /* digits and points only, */
		    && (!dot || !strchr(dot + 1, '.'))    /* at most one point, */
		    && strpbrk(v, "0123456789");          /* some digit */
	double x = plain ? strtod(v, NULL) : 0;
	if (!(x > lo && x <= hi))
		usage_error("%s needs a number in (%g, %g], got '%.40s'", flag, lo, hi, v ? v : "");
	return x;
}

static const char *dir_arg(const char *flag, const char *v)
{
	struct stat st;
	if (!v || !*v)
		usage_error("%s needs a directory", flag);
	if (strlen(v) > TMPDIR_MAX)
		usage_error("%s: path longer than %d bytes", flag, TMPDIR_MAX);
	if (stat(v, &st) != 0 || !S_ISDIR(st.st_mode))
		usage_error("%s: '%.200s' is not an existing directory", flag, v);
	return v;
}

/* --cpu must name a CPU this process may run on. */
static long cpu_arg(const char *flag, const char *v)
{
	long cpu = num_arg(flag, v, 0, CPU_SETSIZE - 1);
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) == 0 && !CPU_ISSET((int)cpu, &set))
		usage_error("%s %ld: not a CPU this process may run on", flag, cpu);
	return cpu;
}

void parse_run_opts(int argc, char **argv, struct opts *o)
{
	int samples_given = 0;
	for (int i = 3; i < argc; i += 2) {
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(f, "--samples")) {
			o->samples = num_arg(f, v, 0, 1000000);
			samples_given = 1;
		}
		else if (!strcmp(f, "--warmup")) o->warmup = num_arg(f, v, 0, 1000000);
		else if (!strcmp(f, "--min-time-ms")) o->min_time_ms = num_arg(f, v, 0, 3600000);
		else if (!strcmp(f, "--max-sample-ms")) o->max_sample_ms = num_arg(f, v, 0, 86400000);
		else if (!strcmp(f, "--iters")) o->iters = (uint64_t)num_arg(f, v, 1, 1L << 40);
		else if (!strcmp(f, "--parallel")) o->parallel = num_arg(f, v, 1, 256);
		else if (!strcmp(f, "--cpu")) o->cpu = cpu_arg(f, v);
		else if (!strcmp(f, "--tmpdir")) tmpdir_path = dir_arg(f, v);
		else if (!strcmp(f, "--inject")) o->inject_pct = pct_arg(f, v, 0, 100);
		else if (!strcmp(f, "--tracepoint-id")) tracepoint_id = num_arg(f, v, 0, 1000000);
		else if (!strcmp(f, "--count")) o->count = num_arg(f, v, 0, 1000);
		else if (!strcmp(f, "--count-settle-ms")) o->count_settle_ms = num_arg(f, v, 0, 10000);
		else if (!strcmp(f, "--duration-ms")) o->duration_ms = num_arg(f, v, 1, 86400000);
		else if (!strcmp(f, "--ref-steps")) o->ref_steps = num_arg(f, v, 0, 1L << 24);
		else if (!strcmp(f, "--go")) {
			o->go = 1;
			i--; /* a flag: no value */
		}
		else if (!strcmp(f, "--step")) {
			o->step = 1;
			i--;
		}
		else if (!strcmp(f, "--trace-marks")) {
			o->trace_marks = 1;
			i--;
		}
		else usage_error("unknown option '%.40s' (see --help)", f);
	}
	if (samples_given && o->samples == 0 && o->count == 0)
		usage_error("--samples 0 measures nothing: give --count N (batches with counters)");
	if (o->duration_ms && samples_given && o->samples == 0)
		usage_error("--duration-ms needs timed samples: --samples is their cap, give at least 1");
	if (o->step && (o->parallel > 1 || o->duration_ms || o->go))
		usage_error("--step holds one instance's samples one by one: not with --parallel, --duration-ms or --go");
	if (o->duration_ms && !samples_given)
		o->samples = 1000000; /* the duration ends the samples; --samples only caps them */
	o->probe = o->iters != 0 && o->max_sample_ms > 0; /* 0: the caller vouches for --iters */
}

void parse_env_opts(int argc, char **argv)
{
	for (int i = 2; i < argc; i += 2) {
		if (strcmp(argv[i], "--tmpdir"))
			usage_error("--env takes only --tmpdir DIR, got '%.40s'", argv[i]);
		tmpdir_path = dir_arg(argv[i], i + 1 < argc ? argv[i + 1] : NULL);
	}
}
