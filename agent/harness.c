/* Clock, calibration, overhead measurement and JSON output. */
#define _GNU_SOURCE
#include "harness.h"
#include "counters.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int skipf(struct bctx *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->skip, sizeof c->skip, fmt, ap);
	va_end(ap);
	return -1;
}

void die(const char *fmt, ...)
{
	char msg[512], esc[1024], line[1200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	json_escape(esc, sizeof esc, msg);
	snprintf(line, sizeof line,
		 "{\"schema\":%d,\"type\":\"error\",\"message\":\"%s\",\"errno\":%d}\n",
		 AGENT_SCHEMA, esc, errno);
	emit_line(line);
	fprintf(stderr, "agent: %s\n", msg);
	private_dir_remove();
	_exit(3);
}

void pin_to_cpu(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0)
		die("cannot pin to CPU %d: %s", cpu, strerror(errno));
}

const char *self_exe(void)
{
	static char path[4096];
	if (!path[0]) {
		ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
		if (n <= 0)
			die("cannot read /proc/self/exe");
		path[n] = 0;
	}
	return path;
}

long file_kb(const char *path, const char *key)
{
	FILE *f = fopen(path, "r");
	char line[256];
	size_t kl = strlen(key);
	long kb = -1;
	if (!f)
		return -1;
	while (kb < 0 && fgets(line, sizeof line, f))
		if (strncmp(line, key, kl) == 0 && line[kl] == ':')
			sscanf(line + kl + 1, "%ld kB", &kb);
	fclose(f);
	return kb;
}

uint64_t xorshift64(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

size_t *random_permutation(size_t n, uint64_t *state)
{
	size_t *a = malloc((n ? n : 1) * sizeof *a);
	if (!a)
		die("out of memory for %zu indices", n);
	for (size_t i = 0; i < n; i++)
		a[i] = i;
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)(xorshift64(state) % i), t = a[i - 1];
		a[i - 1] = a[j];
		a[j] = t;
	}
	return a;
}

struct batch time_batch(const struct bench *b, struct bctx *c, uint64_t iters)
{
	struct batch r = {.iters = iters};
	if (b->reset)
		b->reset(c);
	if (c->counting)
		counters_start(c->counting); /* outside the clock reads: never timed */
	if (c->counting && c->marks)
		trace_mark(); /* the window a hypervisor's trace counts opens: a counted batch is never timed */
	uint64_t t0 = now_ns(), c0 = rdtsc();
	b->run(c, iters);
	if (c->inject_frac > 0 && !c->counting) /* a counted batch's time is not kept: no wait in its counts */
		inject_wait(t0, c0, c->inject_frac);
	uint64_t c1 = rdtsc(), t1 = now_ns();
	if (c->counting && c->marks)
		trace_mark();
	if (c->counting)
		counters_stop(c->counting);
	r.ns = t1 - t0;
	r.tsc = c1 - c0;
	return r;
}

/* May `iters` be doubled without passing the benchmark's cap? */
static int may_double(const struct bench *b, uint64_t iters)
{
	return !b->max_iters || iters * 2 <= b->max_iters;
}

uint64_t calibrate(const struct bench *b, struct bctx *c, uint64_t min_ns)
{
	uint64_t iters = 1;
	for (;;) {
		struct batch r = time_batch(b, c, iters);
		if (r.ns >= min_ns || !may_double(b, iters))
			return iters;
		/* Jump close to the goal once the batch is long enough to
		 * trust, then keep doubling; never overshoot by more than 2x,
		 * and never pass the cap. */
		if (r.ns > 1000000 && r.ns * 2 < min_ns) {
			uint64_t want = iters * (min_ns / r.ns);
			while (iters * 2 <= want && may_double(b, iters))
				iters *= 2;
		} else {
			iters *= 2;
		}
	}
}

double reference_ns(uint64_t steps)
{
	double best = 1e300;
	for (int k = 0; k < 2; k++) {
		uint64_t x = 1, t0 = now_ns();
		for (uint64_t i = 0; i < steps; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			__asm__ __volatile__("" : "+r"(x)); /* each step waits for the one before */
		}
		double v = (double)(now_ns() - t0) / (double)steps;
		if (v < best)
			best = v;
	}
	return best;
}

static void null_run(struct bctx *c, uint64_t iters)
{
	(void)c;
	for (uint64_t i = 0; i < iters; i++)
		__asm__ __volatile__("" ::: "memory");
}

double overhead_ns(uint64_t iters)
{
	static const struct bench nullb = {.name = "null", .run = null_run};
	struct bctx c = {0};
	double best = 1e300;
	for (int k = 0; k < 3; k++) {
		struct batch r = time_batch(&nullb, &c, iters);
		double v = (double)r.ns / (double)iters;
		if (v < best)
			best = v;
	}
	return best;
}

void json_escape(char *dst, size_t cap, const char *src)
{
	size_t o = 0;
	for (; *src && o + 7 < cap; src++) {
		unsigned char ch = (unsigned char)*src;
		if (ch == '"' || ch == '\\') {
			dst[o++] = '\\';
			dst[o++] = (char)ch;
		} else if (ch < 0x20) {
			o += (size_t)snprintf(dst + o, cap - o, "\\u%04x", ch);
		} else {
			dst[o++] = (char)ch;
		}
	}
	dst[o] = 0;
}

void emit_line(const char *line)
{
	size_t len = strlen(line), off = 0;
	while (off < len) {
		ssize_t n = write(1, line + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(4);
		off += (size_t)n;
	}
}
