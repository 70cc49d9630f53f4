/* Instructions that exit to the hypervisor.  Under hardware virtualization
 * CPUID always causes a VM exit, so its cost seen from inside a guest is
 * the cost of a world switch; RDTSC usually runs without one (TSC offsetting)
 * and is the control. */
#define _GNU_SOURCE
#include "harness.h"
#include "families.h"

int x86_setup(struct bctx *c)
{
#if defined(__x86_64__) || defined(__i386__)
	(void)c;
	return 0;
#else
	return skipf(c, "needs x86");
#endif
}

void cpuid_run(struct bctx *c, uint64_t iters)
{
	(void)c;
#if defined(__x86_64__) || defined(__i386__)
	for (uint64_t i = 0; i < iters; i++) {
		unsigned a = 0, b, cc = 0, d;
		__asm__ __volatile__("cpuid" : "+a"(a), "=b"(b), "+c"(cc), "=d"(d) : : "memory");
	}
#else
	(void)iters;
#endif
}

void rdtsc_run(struct bctx *c, uint64_t iters)
{
	(void)c;
	for (uint64_t i = 0; i < iters; i++)
		(void)rdtsc();
}
