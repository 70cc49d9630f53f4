/* System-call paths: VMware's getppid loop and lmbench's lat_syscall rows. */
#define _GNU_SOURCE
#include "harness.h"
#include "families.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* getppid: "loop of 10 calls to getppid" (seed 001), raw syscalls. */
int getppid_setup(struct bctx *c)
{
	c->ops_per_iter = 10;
	return 0;
}

void getppid_run(struct bctx *c, uint64_t iters)
{
	(void)c;
	for (uint64_t i = 0; i < iters; i++) {
		syscall(SYS_getppid); syscall(SYS_getppid);
		syscall(SYS_getppid); syscall(SYS_getppid);
		syscall(SYS_getppid); syscall(SYS_getppid);
		syscall(SYS_getppid); syscall(SYS_getppid);
		syscall(SYS_getppid); syscall(SYS_getppid);
	}
}

/* lmbench "null call": one getppid() through libc per operation. */
void null_call_run(struct bctx *c, uint64_t iters)
{
	(void)c;
	for (uint64_t i = 0; i < iters; i++)
		(void)getppid();
}

/* lmbench "null I/O": 1-byte read of /dev/zero or write to /dev/null. */
struct fdstate {
	int fd;
	char buf[8];
	char path[PATH_CAP];
	int fds[128];
	int nfds;
};

static int open_dev(struct bctx *c, const char *path, int flags)
{
	struct fdstate *s = calloc(1, sizeof *s);
	s->fd = open(path, flags);
	if (s->fd < 0) {
		free(s);
		return skipf(c, "cannot open %s: %s", path, strerror(errno));
	}
	c->priv = s;
	return 0;
}

int null_read_setup(struct bctx *c) { return open_dev(c, "/dev/zero", O_RDONLY); }
int null_write_setup(struct bctx *c) { return open_dev(c, "/dev/null", O_WRONLY); }

void null_read_run(struct bctx *c, uint64_t iters)
{
	struct fdstate *s = c->priv;
	for (uint64_t i = 0; i < iters; i++)
		if (read(s->fd, s->buf, 1) != 1)
			die("read /dev/zero: %s", strerror(errno));
}

void null_write_run(struct bctx *c, uint64_t iters)
{
	struct fdstate *s = c->priv;
	for (uint64_t i = 0; i < iters; i++)
		if (write(s->fd, s->buf, 1) != 1)
			die("write /dev/null: %s", strerror(errno));
}

void fd_teardown(struct bctx *c)
{
	struct fdstate *s = c->priv;
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	for (int i = 0; i < s->nfds; i++)
		close(s->fds[i]);
	private_dir_remove();
	free(s);
	c->priv = NULL;
}

/* stat and open+close of an empty regular file made in setup, in the
 * private directory. */
int file_setup(struct bctx *c)
{
	struct fdstate *s = calloc(1, sizeof *s);
	s->fd = private_file(c, "stat", O_WRONLY, s->path, sizeof s->path);
	if (s->fd < 0) {
		free(s);
		private_dir_remove();
		return -1;
	}
	c->priv = s;
	return 0;
}

void stat_run(struct bctx *c, uint64_t iters)
{
	struct fdstate *s = c->priv;
	struct stat st;
	for (uint64_t i = 0; i < iters; i++)
		if (stat(s->path, &st) != 0)
			die("stat: %s", strerror(errno));
}

void open_close_run(struct bctx *c, uint64_t iters)
{
	struct fdstate *s = c->priv;
	for (uint64_t i = 0; i < iters; i++) {
		int fd = open(s->path, O_RDONLY);
		if (fd < 0)
			die("open: %s", strerror(errno));
		close(fd);
	}
}

/* lmbench "slct TCP": select() over arg TCP socket descriptors, none ready. */
int select_tcp_setup(struct bctx *c)
{
	struct fdstate *s = calloc(1, sizeof *s);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	s->fd = -1;
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0) {
		free(s);
		return skipf(c, "no TCP sockets: %s", strerror(errno));
	}
	if (bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 1) != 0) {
		int e = errno;
		close(ls);
		free(s);
		return skipf(c, "cannot listen on 127.0.0.1 (is loopback up?): %s", strerror(e));
	}
	s->fds[0] = ls;
	s->nfds = 1;
	while (s->nfds < c->arg) {
		int d = dup(ls);
		if (d < 0 || d >= FD_SETSIZE) {
			c->priv = s;
			fd_teardown(c);
			return skipf(c, "cannot hold %ld descriptors below FD_SETSIZE", c->arg);
		}
		s->fds[s->nfds++] = d;
	}
	c->priv = s;
	return 0;
}

void select_tcp_run(struct bctx *c, uint64_t iters)
{
	struct fdstate *s = c->priv;
	int maxfd = 0;
	for (int i = 0; i < s->nfds; i++)
		if (s->fds[i] > maxfd)
			maxfd = s->fds[i];
	for (uint64_t i = 0; i < iters; i++) {
		fd_set rd;
		struct timeval tv = {0, 0};
		FD_ZERO(&rd);
		for (int k = 0; k < s->nfds; k++)
			FD_SET(s->fds[k], &rd);
		if (select(maxfd + 1, &rd, NULL, NULL, &tv) < 0)
			die("select: %s", strerror(errno));
	}
}

/* lmbench "sig inst": install a signal handler. */
static void nop_handler(int sig) { (void)sig; }

void sig_install_run(struct bctx *c, uint64_t iters)
{
	(void)c;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = nop_handler;
	for (uint64_t i = 0; i < iters; i++)
		if (sigaction(SIGUSR1, &sa, NULL) != 0)
			die("sigaction: %s", strerror(errno));
}
