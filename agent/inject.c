/* --inject PCT: a known slowdown, for validity tests.  Every timed batch
 * spins, after the benchmark's run and inside the timed region, for PCT
 * percent of the batch's own time, measured untimed after calibration as
 * the median of five batches after a discarded one (one batch alone missed
 * by 10x on rows whose first batch differs, page_fault_file): so each
 * operation costs (1 + PCT/100) times its own. */
#define _GNU_SOURCE
#include <stdlib.h>

#include "harness.h"

void spin(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		__asm__ __volatile__("" : : "r"(i) : "memory");
}

void inject_spin(const struct bctx *c, uint64_t iters)
{
	double n = c->inject_spins * (double)iters;
	spin(n < 1e18 ? (uint64_t)n : (uint64_t)1e18); /* a cast past 2^64 is undefined */
}

/* ns per spin iteration: best of five timings of a batch of about 0.2 ms. */
double spin_ns(void)
{
	uint64_t n = 1024, t;
	for (;;) {
		t = now_ns();
		spin(n);
		t = now_ns() - t;
		if (t >= 200000 || n >= (1ull << 40))
			break;
		n *= 2;
	}
	double best = (double)t / (double)n;
	for (int k = 0; k < 4; k++) {
		t = now_ns();
		spin(n);
		double v = (double)(now_ns() - t) / (double)n;
		if (v < best)
			best = v;
	}
	return best > 0 ? best : 1e-3;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

void inject_setup(const struct bench *b, struct bctx *c, uint64_t iters, double pct)
{
	uint64_t ns[5];
	c->inject_spins = 0;
	time_batch(b, c, iters); /* discarded */
	for (int k = 0; k < 5; k++)
		ns[k] = time_batch(b, c, iters).ns; /* the operation's own time */
	qsort(ns, 5, sizeof ns[0], cmp_u64);
	double iter_ns = (double)ns[2] / (double)iters;
	c->inject_spins = pct / 100.0 * iter_ns / spin_ns();
}
