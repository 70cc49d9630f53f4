/* vmtax agent harness: clock, calibration, overhead, JSON output.
 *
 * Every benchmark is one `struct bench` in benches.c.  A benchmark has an
 * optional setup (outside the timed region), a timed `run` that performs
 * `iters` operations, and an optional teardown.  Setup may decline with a
 * reason (a skip, not a failure) when the platform lacks what it needs.
 */
#ifndef VMTAX_HARNESS_H
#define VMTAX_HARNESS_H

#include <stddef.h>
#include <stdint.h>

struct counters;

#define AGENT_SCHEMA 1
#define AGENT_VERSION "0.1.0"

struct bctx {
	void *priv;            /* per-benchmark state from setup */
	long arg;              /* the table's per-row argument */
	long arg2;             /* second argument (e.g. KB touched per switch) */
	char skip[256];        /* reason, when setup declines */
	uint64_t ops_per_iter; /* operations one iteration performs (default 1) */
	double inject_frac;    /* --inject PCT / 100: the share of its own time a batch waits on */
	struct counters *counting; /* counters around each timed batch (NULL: none) */
	int marks;             /* a trace marker before and after each counted batch (--trace-marks) */
};

typedef int (*bench_setup_fn)(struct bctx *);
typedef void (*bench_run_fn)(struct bctx *, uint64_t iters);
typedef void (*bench_teardown_fn)(struct bctx *);
typedef void (*bench_reset_fn)(struct bctx *); /* before each batch, untimed */

struct bench {
	const char *name;
	const char *suite;
	const char *unit;        /* unit of one sample's value */
	const char *direction;   /* "lower" or "higher" is better */
	const char *description;
	const char *requires;    /* what the platform must offer */
	bench_setup_fn setup;
	bench_run_fn run;
	bench_teardown_fn teardown;
	bench_reset_fn reset;
	long arg, arg2;
	uint64_t max_iters;      /* most iterations a sample may run (0: no cap) */
};

extern const struct bench benches[];
extern const size_t nbenches;

/* Return 0 to run; -1 after skipf() to skip. */
int skipf(struct bctx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* A marker in a hypervisor's trace (--trace-marks, faults.c): one #DE that
 * the process steps over (a PV guest's trap bounces through Xen, which
 * traces it) and one CPUID of leaf TRACE_MARK_LEAF (a VM exit that an HVM
 * guest's hypervisor traces with its leaf).  Elsewhere it costs a signal. */
#define TRACE_MARK_LEAF 0x564d5458u /* "VMTX" */
void trace_mark(void);

/* Clock */
uint64_t now_ns(void);
static inline uint64_t rdtsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
	uint32_t lo, hi;
	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
#else
	return 0;
#endif
}

/* Calibration: the smallest power-of-two iteration count whose run lasts at
 * least min_ns (doubling, as kvm-unit-tests' vmexit.c does), but never more
 * than the benchmark's max_iters: then the largest power of two within it. */
uint64_t calibrate(const struct bench *b, struct bctx *c, uint64_t min_ns);

/* One timed batch: ns and tsc ticks for `iters` iterations (the reset hook
 * before it, untimed; --inject's wait after the run, timed). */
struct batch {
	uint64_t iters, ns, tsc;
};
struct batch time_batch(const struct bench *b, struct bctx *c, uint64_t iters);

/* inject.c: --inject's known slowdown, added by time_batch(): after a
 * batch's run, which began at t0 (c0 in TSC cycles), wait busily for frac of
 * its time again, timed with the TSC (inject_setup first). */
void inject_setup(void); /* before the timed batches: a clock read's cost */
void inject_wait(uint64_t t0, uint64_t c0, double frac);

/* The reference: a fixed chain of `steps` dependent multiply-adds (no
 * memory, no system call), timed right before and right after each timed
 * sample.  Nothing a hypervisor intercepts runs in it, so what moves it
 * within one target is the CPU's own speed at that moment -- a busy sibling
 * thread on the host, a frequency change, a core shared by time -- the
 * host's state the sample was taken in (vmtax doctor; issue 21).  Its level
 * differs by target (TCG translates it); its changes are what count.  ns per
 * step, the lesser of two runs (an interrupt lands in one, rarely both). */
#define REF_STEPS 16384
double reference_ns(uint64_t steps);

/* Loop-and-timer overhead per iteration in ns, for `iters` iterations. */
double overhead_ns(uint64_t iters);

/* JSON helpers: write one whole line with a single write(2) so that lines
 * from --parallel instances never interleave. */
void json_escape(char *dst, size_t cap, const char *src);
void emit_line(const char *line);

/* Shared by several families. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void pin_to_cpu(int cpu);
const char *self_exe(void);
/* The number of a "Key: N kB" line of a /proc file, -1 when absent. */
long file_kb(const char *path, const char *key);
uint64_t xorshift64(uint64_t *state);
/* 0..n-1 shuffled (Fisher-Yates driven by xorshift64 from *state); free() it. */
size_t *random_permutation(size_t n, uint64_t *state);

/* tmpdir.c: the private directory of the file benchmarks under --tmpdir. */
#define TMPDIR_MAX 3000        /* longest --tmpdir accepted */
#define PATH_CAP (TMPDIR_MAX + 64) /* room for a private file's path */
extern const char *tmpdir_path;
int private_dir_make(struct bctx *c);      /* 0, or -1 after skipf() */
/* Creates `name` there (O_EXCL, O_NOFOLLOW, mode 0600) with open(2) `flags`;
 * returns the descriptor and its path, or -1 after skipf(). */
int private_file(struct bctx *c, const char *name, int flags, char *path, size_t cap);
void private_dir_remove(void);             /* the directory and its files */
/* A private file holding `len` bytes of data, already unlinked: its
 * descriptor, or -1 after skipf() and private_dir_remove(). */
int private_data_file(struct bctx *c, const char *name, size_t len);

#endif
