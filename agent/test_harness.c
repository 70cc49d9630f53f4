/* Unit tests of the harness: calibration, JSON escaping, overhead. */
#include "harness.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static int failures, checks;
#define CHECK(cond) do { checks++; if (!(cond)) { failures++; \
	fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); } } while (0)

static void spin_run(struct bctx *c, uint64_t iters)
{
	/* each iteration burns about c->arg ns */
	for (uint64_t i = 0; i < iters; i++) {
		uint64_t t = now_ns();
		while (now_ns() - t < (uint64_t)c->arg)
			;
	}
}

static int resets;
static void count_reset(struct bctx *c) { (void)c; resets++; }

int main(void)
{
	char out[64];
	json_escape(out, sizeof out, "a\"b\\c\n\x01");
	CHECK(strcmp(out, "a\\\"b\\\\c\\u000a\\u0001") == 0);
	json_escape(out, 8, "0123456789abcdef"); /* truncates, stays terminated */
	CHECK(strlen(out) < 8);

	struct bench b = {.name = "spin", .run = spin_run, .reset = count_reset};
	struct bctx c = {.arg = 10000}; /* 10 us per iteration */
	uint64_t iters = calibrate(&b, &c, 2000000); /* goal: 2 ms */
	struct batch r = time_batch(&b, &c, iters);
	CHECK(r.ns >= 2000000);           /* reaches the goal */
	CHECK(iters >= 128 && iters <= 512); /* ...without overshooting 2x (+slack) */
	CHECK((iters & (iters - 1)) == 0);  /* powers of two */
	CHECK(resets > 0);                  /* reset runs before every batch */

	b.max_iters = 16;
	CHECK(calibrate(&b, &c, 1000000000ull) == 16); /* cap honoured */

	double ovh = overhead_ns(1000000);
	CHECK(ovh > 0 && ovh < 50); /* an empty loop iteration is cheap */

	printf("%d passed, %d failed\n", checks - failures, failures);
	return failures != 0;
}
