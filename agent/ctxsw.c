/* Context switches: VMware's thread switch and lmbench's lat_ctx ring.
 * Figures depend heavily on whether the processes share a CPU: the runner
 * records the pinning (agent --cpu) with every sample. */
#define _GNU_SOURCE
#include "harness.h"
#include "families.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void xread(int fd, char *b)
{
	ssize_t n;
	while ((n = read(fd, b, 1)) < 0 && errno == EINTR)
		;
	if (n != 1)
		die("token read: %s", n == 0 ? "end of file" : strerror(errno));
}

static void xwrite(int fd, const char *b)
{
	ssize_t n;
	while ((n = write(fd, b, 1)) < 0 && errno == EINTR)
		;
	if (n != 1)
		die("token write: %s", strerror(errno));
}

/* threadswitch: two threads pass a token through two pipes. */
struct tsw {
	int ping[2], pong[2];
	pthread_t th;
};

static void *tsw_peer(void *arg)
{
	struct tsw *s = arg;
	char b;
	while (read(s->ping[0], &b, 1) == 1)
		if (write(s->pong[1], &b, 1) != 1)
			break;
	return NULL;
}

int threadswitch_setup(struct bctx *c)
{
	struct tsw *s = calloc(1, sizeof *s);
	if (pipe(s->ping) || pipe(s->pong)) {
		free(s);
		return skipf(c, "pipe: %s", strerror(errno));
	}
	if (pthread_create(&s->th, NULL, tsw_peer, s) != 0) {
		free(s);
		return skipf(c, "pthread_create failed");
	}
	c->priv = s;
	c->ops_per_iter = 2; /* one round trip is two switches */
	return 0;
}

void threadswitch_run(struct bctx *c, uint64_t iters)
{
	struct tsw *s = c->priv;
	char b = 'x';
	for (uint64_t i = 0; i < iters; i++) {
		xwrite(s->ping[1], &b);
		xread(s->pong[0], &b);
	}
}

void threadswitch_teardown(struct bctx *c)
{
	struct tsw *s = c->priv;
	close(s->ping[1]);
	pthread_join(s->th, NULL);
	close(s->ping[0]);
	close(s->pong[0]);
	close(s->pong[1]);
	free(s);
}

/* lat_ctx: c->arg processes in a ring of pipes; each, on receiving the
 * token, sums its own c->arg2 KB array, then passes the token on.  One
 * operation is one hop (switch + pipe read/write + touch). */
#define MAXRING 64
struct ring {
	int nproc;
	int pipes[MAXRING][2]; /* pipes[i]: from member i-1 into member i */
	pid_t pids[MAXRING];
	long *data;
	size_t words;
};

static volatile long ctx_sink;

static void touch(const long *d, size_t n)
{
	long sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += d[i];
	ctx_sink = sum;
}

static void close_fds(int first, int last)
{
	if (first > last)
		return;
#ifdef SYS_close_range
	if (syscall(SYS_close_range, (unsigned)first, (unsigned)last, 0u) == 0)
		return;
#endif
	struct rlimit rl; /* before Linux 5.9: one by one, up to the limit */
	int max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 ? (int)rl.rlim_cur : 65536;
	for (int fd = first; fd <= last && fd < max; fd++)
		close(fd);
}

/* A ring member keeps stdio and its two pipe ends, nothing else: anything
 * it inherited (the other ring pipes, --parallel's barrier pipe) would stay
 * open as long as the ring lives, and the barrier would never see its end. */
static void keep_only(int a, int b)
{
	int lo = a < b ? a : b, hi = a < b ? b : a;
	close_fds(3, lo - 1);
	close_fds(lo + 1, hi - 1);
	close_fds(hi + 1, INT_MAX);
}

static void ring_member(struct ring *r, int me)
{
	int in = r->pipes[me][0], out = r->pipes[(me + 1) % r->nproc][1];
	keep_only(in, out);
	r->data = calloc(r->words ? r->words : 1, sizeof(long));
	char b;
	while (read(in, &b, 1) == 1) {
		touch(r->data, r->words);
		if (write(out, &b, 1) != 1)
			break;
	}
	_exit(0);
}

int ctx_setup(struct bctx *c)
{
	if (c->arg < 2 || c->arg > MAXRING)
		return skipf(c, "ring size %ld out of range", c->arg);
	struct ring *r = calloc(1, sizeof *r);
	r->nproc = (int)c->arg;
	r->words = (size_t)c->arg2 * 1024 / sizeof(long);
	for (int i = 0; i < r->nproc; i++)
		if (pipe(r->pipes[i]) != 0) {
			free(r);
			return skipf(c, "pipe: %s", strerror(errno));
		}
	pid_t parent = getpid();
	for (int i = 1; i < r->nproc; i++) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork: %s", strerror(errno));
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(0);
			ring_member(r, i);
		}
		r->pids[i] = pid;
	}
	r->data = calloc(r->words ? r->words : 1, sizeof(long));
	c->priv = r;
	c->ops_per_iter = (uint64_t)r->nproc;
	return 0;
}

void ctx_run(struct bctx *c, uint64_t iters)
{
	struct ring *r = c->priv;
	int in = r->pipes[0][0], out = r->pipes[1 % r->nproc][1];
	char b = 'x';
	for (uint64_t i = 0; i < iters; i++) {
		touch(r->data, r->words);
		xwrite(out, &b);
		xread(in, &b);
	}
}

void ctx_teardown(struct bctx *c)
{
	struct ring *r = c->priv;
	for (int i = 0; i < r->nproc; i++) {
		close(r->pipes[i][0]);
		close(r->pipes[i][1]);
	}
	for (int i = 1; i < r->nproc; i++)
		waitpid(r->pids[i], NULL, 0);
	free(r->data);
	free(r);
}
