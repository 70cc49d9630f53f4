/* Page faults: the first touch of anonymous memory (page_fault) and
 * lmbench's lat_pagefault, the first read of pages of a mapped file
 * (page_fault_file).  Both map a fresh region before every batch in the
 * reset hook, outside the timed region, and so cap a sample's iterations
 * at the region's pages. */
#define _GNU_SOURCE
#include "harness.h"
#include "families.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct pfstate {
	char *base;
	size_t len, npages;
	long pg;
	int fd;        /* page_fault_file: the file; page_fault: -1 */
	size_t *order; /* page_fault_file: the order pages are read in */
};

static volatile unsigned pf_sink;

static struct pfstate *pf_new(struct bctx *c)
{
	struct pfstate *s = calloc(1, sizeof *s);
	s->pg = sysconf(_SC_PAGESIZE);
	s->npages = (size_t)c->arg;
	s->len = s->npages * (size_t)s->pg;
	s->fd = -1;
	c->priv = s;
	return s;
}

/* Before every batch: unmap the last region, map a fresh one. */
static void pf_remap(struct pfstate *s, int prot, int flags)
{
	if (s->base)
		munmap(s->base, s->len);
	s->base = mmap(NULL, s->len, prot, flags, s->fd, 0);
	if (s->base == MAP_FAILED)
		die("mmap %zu bytes: %s", s->len, strerror(errno));
}

/* page_fault: one op = the first store to one page of a fresh anonymous
 * private region (a zero-fill fault), THP off. */
int page_fault_setup(struct bctx *c)
{
	pf_new(c);
	return 0;
}

void page_fault_reset(struct bctx *c)
{
	struct pfstate *s = c->priv;
	pf_remap(s, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
	madvise(s->base, s->len, MADV_NOHUGEPAGE);
}

void page_fault_run(struct bctx *c, uint64_t iters)
{
	struct pfstate *s = c->priv;
	for (uint64_t i = 0; i < iters; i++)
		((volatile char *)s->base)[i * (uint64_t)s->pg] = 1;
}

void page_fault_teardown(struct bctx *c)
{
	struct pfstate *s = c->priv;
	if (s->base)
		munmap(s->base, s->len);
	if (s->fd >= 0)
		close(s->fd);
	free(s->order);
	free(s);
	private_dir_remove();
}

/* page_fault_file (lat_pagefault): one op = the first read of one page of
 * a file mapped PROT_READ, MAP_SHARED, pages in a fixed pseudo-random
 * order.  The file's pages stay in the page cache (written in setup). */
int page_fault_file_setup(struct bctx *c)
{
	struct pfstate *s = pf_new(c);
	s->fd = private_data_file(c, "pagefault", s->len);
	if (s->fd < 0) {
		free(s);
		c->priv = NULL;
		return -1;
	}
	uint64_t seed = 0x2545f4914f6cdd1dull;
	s->order = random_permutation(s->npages, &seed);
	return 0;
}

void page_fault_file_reset(struct bctx *c)
{
	pf_remap(c->priv, PROT_READ, MAP_SHARED);
}

void page_fault_file_run(struct bctx *c, uint64_t iters)
{
	struct pfstate *s = c->priv;
	unsigned sum = 0;
	for (uint64_t i = 0; i < iters; i++)
		sum += ((volatile unsigned char *)s->base)[s->order[i] * (size_t)s->pg];
	pf_sink = sum;
}
