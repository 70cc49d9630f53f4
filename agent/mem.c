/* Memory paths: lmbench's lat_mmap row and a TLB-pressure pointer chase. */
#define _GNU_SOURCE
#include "harness.h"
#include "families.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* mmap, as lmbench's lat_mmap: map a c->arg KB file read-write and shared,
 * store one byte every 16 KiB over the first tenth of the mapping, unmap. */
#define MMAP_STRIDE (16u << 10)
struct mmstate {
	int fd;
	size_t len;
};

int mmap_setup(struct bctx *c)
{
	struct mmstate *s = calloc(1, sizeof *s);
	s->len = (size_t)c->arg * 1024;
	s->fd = private_data_file(c, "mmap", s->len);
	if (s->fd < 0) {
		free(s);
		return -1;
	}
	c->priv = s;
	return 0;
}

void mmap_run(struct bctx *c, uint64_t iters)
{
	struct mmstate *s = c->priv;
	for (uint64_t i = 0; i < iters; i++) {
		volatile char *p = mmap(NULL, s->len, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
		if (p == MAP_FAILED)
			die("mmap: %s", strerror(errno));
		for (size_t off = 0; off < s->len / 10; off += MMAP_STRIDE)
			p[off] = (char)s->len; /* lmbench stores size & 0xff */
		munmap((void *)p, s->len);
	}
}

void mmap_teardown(struct bctx *c)
{
	struct mmstate *s = c->priv;
	close(s->fd);
	free(s);
	private_dir_remove();
}

/* TLB pressure: a random cyclic pointer chase that visits every 4 KiB page
 * of a c->arg MiB region once per lap, at a random cache line of each page,
 * so (almost) every load misses the TLB (64 MiB: 16384 pages, far beyond
 * any TLB's reach).  With c->arg2 == 2 the region is
 * backed by 2 MiB pages, whose TLB reach covers it: the difference between
 * the two rows is the cost of the page walk, which nested paging (EPT/NPT)
 * makes two-dimensional. */
struct chase {
	void **start;
	char *base;
	size_t len;
};

static volatile void *chase_sink;

static long anon_huge_kb(void)
{
	return file_kb("/proc/self/smaps_rollup", "AnonHugePages");
}

static char *map_huge(struct bctx *c, size_t len)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (p != MAP_FAILED)
		return p;
	/* No hugetlbfs pool: ask for transparent huge pages instead. */
	size_t huge = 2u << 20;
	char *raw = mmap(NULL, len + huge, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED) {
		skipf(c, "mmap: %s", strerror(errno));
		return NULL;
	}
	char *al = (char *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
	if (madvise(al, len, MADV_HUGEPAGE) != 0) {
		skipf(c, "no transparent huge pages (madvise: %s)", strerror(errno));
		munmap(raw, len + huge);
		return NULL;
	}
	long before = anon_huge_kb();
	memset(al, 1, len);
	long after = anon_huge_kb();
	if (before < 0 || after - before < (long)(len / 1024) * 9 / 10) {
		skipf(c, "kernel gave no 2 MiB pages (THP off or memory fragmented: %ld of %zu KiB huge)",
		      after - before, len / 1024);
		munmap(raw, len + huge);
		return NULL;
	}
	return al;
}

/* The chase needs its region and as much again to spare: a guest short of
 * memory would swap or fail (UML's hosts also ran out of mappings). */
static int enough_memory(struct bctx *c, size_t len)
{
	long avail_kb = file_kb("/proc/meminfo", "MemAvailable"); /* -1 before Linux 3.14 */
	size_t need_mib = 2 * (len >> 20);
	if (avail_kb >= 0 && (size_t)avail_kb / 1024 < need_mib)
		return skipf(c, "needs %zu MiB, MemAvailable %ld MiB", need_mib, avail_kb / 1024);
	return 0;
}

static char *map_small(struct bctx *c, size_t len)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		skipf(c, "mmap %zu MiB: %s", len >> 20, strerror(errno));
		return NULL;
	}
	madvise(p, len, MADV_NOHUGEPAGE);
	return p;
}

/* Link one slot per 4 KiB page, at a random cache line of it, into one
 * cycle in random page order. */
static void **link_chase(char *base, size_t npages)
{
	size_t pg = 4096;
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	size_t *order = random_permutation(npages, &seed);
	void **slot = malloc(npages * sizeof *slot);
	for (size_t i = 0; i < npages; i++)
		slot[i] = base + order[i] * pg + (xorshift64(&seed) % (pg / 64)) * 64;
	for (size_t i = 0; i < npages; i++)
		*(void **)slot[i] = slot[(i + 1) % npages];
	void **start = slot[0];
	free(slot);
	free(order);
	return start;
}

int tlb_setup(struct bctx *c)
{
	size_t len = (size_t)c->arg << 20;
	if (enough_memory(c, len) != 0)
		return -1;
	struct chase *s = calloc(1, sizeof *s);
	s->base = c->arg2 == 2 ? map_huge(c, len) : map_small(c, len);
	if (!s->base) {
		free(s);
		return -1;
	}
	s->len = len;
	s->start = link_chase(s->base, len / 4096);
	c->priv = s;
	return 0;
}

void tlb_run(struct bctx *c, uint64_t iters)
{
	struct chase *s = c->priv;
	void **p = s->start;
	for (uint64_t i = 0; i < iters; i++)
		p = *p;
	chase_sink = p;
	s->start = p;
}

void tlb_teardown(struct bctx *c)
{
	struct chase *s = c->priv;
	munmap(s->base, s->len); /* an aligned THP region leaks its slack: fine at exit */
	free(s);
}
