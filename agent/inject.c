/* --inject PCT: a known slowdown, for validity tests.  Every timed batch,
 * after the benchmark's run and inside the timed region, waits busily until
 * PCT percent of the batch's own time has passed again: each batch then
 * lasts (1 + PCT/100) times what it would have, so every operation costs
 * that many times its own.  Nothing runs before the timed batches that an
 * uninjected process does not run too, but a few clock reads.  (An earlier
 * version sized a spin loop from untimed batches run ahead of the timed
 * ones: on rows whose cost falls as a process ages, page_fault_file, those
 * extra batches made the injected process faster.)
 *
 * The wait is timed with the TSC, never the clock: where a clock read is a
 * system call that costs as much as the batch's operations (User-mode
 * Linux), a wait that read the clock took a read's worth more than it was
 * asked each time (results/gate-guests.md).  A batch's
 * time holds a clock read's cost besides its run (half of the read that
 * starts it, half of the one that ends it): the wait adds PCT percent of
 * that too (inject_setup measures it, in TSC cycles). */
#define _GNU_SOURCE
#include "harness.h"

static uint64_t clock_cycles; /* one clock read, in TSC cycles: a batch's time beyond its run */

void inject_setup(void)
{
	uint64_t best = UINT64_MAX;
	for (int k = 0; k < 5; k++) {
		uint64_t a = rdtsc();
		(void)now_ns();
		uint64_t b = rdtsc();
		if (b - a < best)
			best = b - a;
	}
	clock_cycles = best == UINT64_MAX ? 0 : best;
}

void inject_wait(uint64_t t0, uint64_t c0, double frac)
{
	uint64_t c = rdtsc();
	if (c == 0) { /* no TSC (not x86): the clock, as it is */
		uint64_t own = now_ns() - t0;
		double extra = (double)own * frac;
		uint64_t until = t0 + own + (extra < 1e18 ? (uint64_t)extra : (uint64_t)1e18);
		while (now_ns() < until)
			__asm__ __volatile__("" ::: "memory");
		return;
	}
	double extra = (double)(c - c0 + clock_cycles) * frac;
	uint64_t until = c + (extra < 1e18 ? (uint64_t)extra : (uint64_t)1e18);
	while (rdtsc() < until)
		__asm__ __volatile__("" ::: "memory");
}
