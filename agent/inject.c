/* --inject PCT: a known slowdown, for validity tests.  Every timed batch
 * spins, after the benchmark's run and inside the timed region, for PCT
 * percent of the batch's own time as measured once, untimed, after
 * calibration: so each operation costs (1 + PCT/100) times its own. */
#define _GNU_SOURCE
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

void inject_setup(const struct bench *b, struct bctx *c, uint64_t iters, double pct)
{
	c->inject_spins = 0;
	struct batch r = time_batch(b, c, iters); /* the operation's own time */
	double iter_ns = (double)r.ns / (double)iters;
	c->inject_spins = pct / 100.0 * iter_ns / spin_ns();
}
