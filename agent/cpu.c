/* The PI test of seed 004: an arbitrary-precision computation of PI
 * (the Rabinowitz-Wagon spigot), timed with the cycle counter.  Every
 * sample carries both nanoseconds and TSC ticks per computation. */
#define _GNU_SOURCE
#include "harness.h"
#include "families.h"

#include <stdlib.h>
#include <string.h>

struct pistate {
	int ndigits;
	int *a;
	char *out;
};

/* Writes ndigits decimal digits of PI ("31415...") into out. */
static void pi_digits(int ndigits, int *a, char *out)
{
	int len = ndigits * 10 / 3 + 2, nines = 0, predigit = 0, o = 0;
	for (int i = 0; i < len; i++)
		a[i] = 2;
	for (int j = 0; j < ndigits + 1; j++) {
		int q = 0;
		for (int i = len; i > 0; i--) {
			int x = 10 * a[i - 1] + q * i;
			a[i - 1] = x % (2 * i - 1);
			q = x / (2 * i - 1);
		}
		a[0] = q % 10;
		q /= 10;
		if (q == 9) {
			nines++;
		} else if (q == 10) {
			if (o < ndigits) out[o++] = (char)('0' + predigit + 1);
			for (; nines > 0; nines--)
				if (o < ndigits) out[o++] = '0';
			predigit = 0;
		} else {
			if (j > 0 && o < ndigits) out[o++] = (char)('0' + predigit);
			predigit = q;
			for (; nines > 0; nines--)
				if (o < ndigits) out[o++] = '9';
		}
	}
	if (o < ndigits)
		out[o++] = (char)('0' + predigit);
	out[o] = 0;
}

int pi_setup(struct bctx *c)
{
	struct pistate *s = calloc(1, sizeof *s);
	s->ndigits = (int)c->arg;
	s->a = calloc((size_t)s->ndigits * 10 / 3 + 2, sizeof(int));
	s->out = calloc((size_t)s->ndigits + 2, 1);
	pi_digits(s->ndigits, s->a, s->out);
	if (strncmp(s->out, "31415926535897932384626433832795028841971", 41) != 0)
		die("PI self-check failed: got %.41s", s->out);
	c->priv = s;
	return 0;
}

void pi_run(struct bctx *c, uint64_t iters)
{
	struct pistate *s = c->priv;
	for (uint64_t i = 0; i < iters; i++)
		pi_digits(s->ndigits, s->a, s->out);
}

void pi_teardown(struct bctx *c)
{
	struct pistate *s = c->priv;
	free(s->a);
	free(s->out);
	free(s);
}
