/* Unit tests of the harness: calibration, JSON escaping, overhead. */
#include "harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

/* A capped benchmark whose batches pass 1 ms long before the cap, so that
 * calibration takes its jump-ahead branch.  Batches over the cap return at
 * once (instead of overrunning a buffer, as page_fault would). */
static uint64_t capped_most, capped_cap;
static int capped_long_batch;
static void capped_run(struct bctx *c, uint64_t iters)
{
	if (iters > capped_most)
		capped_most = iters;
	if (iters > capped_cap)
		return;
	uint64_t t = now_ns();
	spin_run(c, iters);
	if (now_ns() - t > 1000000 && iters < capped_cap)
		capped_long_batch = 1;
}

static void test_cap_in_jump_ahead(void)
{
	struct bench b = {.name = "capped", .run = capped_run, .max_iters = 600};
	struct bctx c = {.arg = 20000}; /* 20 us: 64 iterations pass 1 ms */
	capped_cap = b.max_iters;
	uint64_t iters = calibrate(&b, &c, 1000000000ull); /* goal 1 s: far past the cap */
	CHECK(capped_long_batch);      /* the jump-ahead branch was reachable */
	CHECK(capped_most <= 600);     /* no batch ever exceeded the cap */
	CHECK(iters == 512);           /* the largest power of two under it */
}

static void test_json_escape(void)
{
	char out[64];
	json_escape(out, sizeof out, "a\"b\\c\n\x01");
	CHECK(strcmp(out, "a\\\"b\\\\c\\u000a\\u0001") == 0);
	json_escape(out, 8, "0123456789abcdef"); /* truncates, stays terminated */
	CHECK(strlen(out) < 8);
}

/* Calibration toward a 2 ms goal at 10 us per iteration.  Preemption on a
 * busy machine can only lengthen a batch, so stop calibration early, never
 * late: one good try out of twenty is a pass. */
static int calibration_reaches_goal(struct bench *b, struct bctx *c)
{
	uint64_t iters = calibrate(b, c, 2000000);
	struct batch r = time_batch(b, c, iters);
	return r.ns >= 2000000                  /* reaches the goal */
	       && iters >= 128 && iters <= 512  /* ...without overshooting 2x (+slack) */
	       && (iters & (iters - 1)) == 0;   /* powers of two */
}

static void test_calibration(void)
{
	struct bench b = {.name = "spin", .run = spin_run, .reset = count_reset};
	struct bctx c = {.arg = 10000}; /* 10 us per iteration */
	int ok = 0;
	for (int try = 0; try < 20 && !ok; try++)
		ok = calibration_reaches_goal(&b, &c);
	CHECK(ok);
	CHECK(resets > 0); /* reset runs before every batch */

	b.max_iters = 16;
	CHECK(calibrate(&b, &c, 1000000000ull) == 16); /* cap honoured */
}

static int dir_entries(const char *path)
{
	DIR *d = opendir(path);
	int n = 0;
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* In a child: make a private file, then end as `how` says (EXIT, DIE or a
 * signal).  Returns the child's wait status. */
enum { EXIT = -1, DIE = -2 };
static int child_with_private_file(int how)
{
	pid_t pid = fork();
	if (pid == 0) {
		struct bctx c = {0};
		char path[PATH_CAP];
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(null, 2);
		if (private_file(&c, "f", O_RDWR, path, sizeof path) < 0)
			_exit(9);
		if (how == EXIT)
			exit(0);
		if (how == DIE)
			die("dying on purpose");
		raise(how);
		_exit(8);
	}
	int st;
	waitpid(pid, &st, 0);
	return st;
}

static void test_private_dir(void)
{
	char top[] = "/tmp/vmtax-test-XXXXXX", path[PATH_CAP], again[PATH_CAP];
	struct bctx c = {0};
	struct stat st;
	CHECK(mkdtemp(top) != NULL);
	tmpdir_path = top;
	int fd = private_file(&c, "a", O_RDWR, path, sizeof path);
	CHECK(fd >= 0 && strncmp(path, top, strlen(top)) == 0);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
	*strrchr(path, '/') = 0;
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0700); /* mkdtemp's */
	CHECK(private_file(&c, "a", O_RDWR, again, sizeof again) < 0 && c.skip[0]); /* O_EXCL */
	close(fd);
	private_dir_remove();
	CHECK(dir_entries(top) == 0);

	int s = child_with_private_file(EXIT);
	CHECK(WIFEXITED(s) && WEXITSTATUS(s) == 0 && dir_entries(top) == 0);
	s = child_with_private_file(DIE);
	CHECK(WIFEXITED(s) && WEXITSTATUS(s) == 3 && dir_entries(top) == 0);
	int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
	for (int i = 0; i < 4; i++) {
		s = child_with_private_file(sigs[i]);
		CHECK(WIFSIGNALED(s) && WTERMSIG(s) == sigs[i] && dir_entries(top) == 0);
	}
	rmdir(top);
}

static void test_random_permutation(void)
{
	size_t sizes[] = {0, 1, 2, 1000};
	for (size_t k = 0; k < 4; k++) {
		uint64_t seed = 42;
		size_t n = sizes[k], *p = random_permutation(n, &seed);
		char *seen = calloc(n + 1, 1);
		int ok = 1, moved = 0;
		for (size_t i = 0; i < n; i++) {
			ok &= p[i] < n && !seen[p[i]];
			seen[p[i] < n ? p[i] : n] = 1;
			moved += p[i] != i;
		}
		CHECK(ok);                     /* each index exactly once */
		CHECK(n < 1000 || moved > 900); /* and shuffled */
		free(seen);
		free(p);
	}
}

static void test_file_kb(void)
{
	char path[] = "/tmp/vmtax-test-meminfo-XXXXXX";
	int fd = mkstemp(path);
	const char text[] = "MemTotal:       8000000 kB\nMemFree: 1 kB\n"
			    "MemAvailableX:  5 kB\nMemAvailable:     123456 kB\n";
	CHECK(fd >= 0 && write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1));
	close(fd);
	CHECK(file_kb(path, "MemAvailable") == 123456); /* not MemAvailableX */
	CHECK(file_kb(path, "MemTotal") == 8000000);
	CHECK(file_kb(path, "Cached") == -1);
	CHECK(file_kb("/nonexistent", "MemTotal") == -1);
	unlink(path);
}

static uint64_t best_of_5(const struct bench *b, struct bctx *c, uint64_t iters)
{
	uint64_t best = UINT64_MAX;
	for (int k = 0; k < 5; k++) {
		uint64_t ns = time_batch(b, c, iters).ns;
		best = ns < best ? ns : best;
	}
	return best;
}

/* --inject 50 makes every batch 1.5 times as long as its own run. */
static void test_inject(void)
{
	struct bench b = {.name = "spin", .run = spin_run};
	struct bctx c = {.arg = 10000};
	/* a batch of about 1 ms: long against the clock reads */
	uint64_t n = 64;
	for (;;) {
		c.inject_frac = 0;
		if (time_batch(&b, &c, n).ns >= 1000000 || n >= (1ull << 30))
			break;
		n *= 2;
	}
	int ok = 0;
	for (int k = 0; k < 5 && !ok; k++) {
		c.inject_frac = 0;
		double plain = (double)best_of_5(&b, &c, n);
		c.inject_frac = 0.5;
		double ratio = (double)best_of_5(&b, &c, n) / plain;
		ok = ratio > 1.4 && ratio < 1.65;
	}
	CHECK(ok);
}

int main(void)
{
	/* Run under nohup or as a background job, this process inherits SIGHUP
	 * or SIGINT ignored, which the agent rightly keeps ignored; the cleanup
	 * test needs every signal it raises at its default. */
	int reset[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
	for (int i = 0; i < 4; i++)
		signal(reset[i], SIG_DFL);
	test_json_escape();
	test_calibration();
	test_cap_in_jump_ahead();
	test_private_dir();
	test_random_permutation();
	test_file_kb();
	test_inject();

	double ovh = overhead_ns(1000000);
	CHECK(ovh > 0 && ovh < 50); /* an empty loop iteration is cheap */

	printf("%d passed, %d failed\n", checks - failures, failures);
	return failures != 0;
}
