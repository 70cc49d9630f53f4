/* --inject PCT: a known slowdown, for validity tests.  Every timed batch,
 * after the benchmark's run and inside the timed region, waits busily until
 * PCT percent of the batch's own time has passed again: each batch then
 * lasts exactly (1 + PCT/100) times what it took, so every operation costs
 * that many times its own.  Nothing runs before the timed batches that an
 * uninjected process does not run too.  (An earlier version sized a spin
 * loop from untimed batches run ahead of the timed ones: on rows whose cost
 * falls as a process ages, page_fault_file, those extra batches made the
 * injected process faster, and a 3% slowdown came out as 0.976.) */
#define _GNU_SOURCE
#include "harness.h"

void inject_wait(uint64_t t0, double frac)
{
	uint64_t own = now_ns() - t0;
	double extra = (double)own * frac;
	uint64_t until = t0 + own + (extra < 1e18 ? (uint64_t)extra : (uint64_t)1e18);
	while (now_ns() < until)
		__asm__ __volatile__("" ::: "memory");
}
