/* The private temporary directory of the file benchmarks.
 *
 * Names in a shared directory such as /tmp that anyone can predict (the
 * agent's PID) let another user plant a symlink there and have the agent
 * truncate and write whatever it points at.  So a benchmark that needs files
 * makes one directory of its own with mkdtemp() (mode 0700) under --tmpdir
 * and creates them inside it with O_CREAT|O_EXCL|O_NOFOLLOW.  The directory
 * and its files are removed at teardown, at exit (die() included), and on
 * SIGINT, SIGTERM, SIGHUP and SIGPIPE: the handler removes them, then
 * re-raises the signal with its default action. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXFILES 4

const char *tmpdir_path = "/tmp";

/* Everything the signal handler reads is complete before `made` or
 * `nfiles` says it exists.  `owner` keeps forked children off it. */
static char dir[TMPDIR_MAX + 32];
static char files[MAXFILES][TMPDIR_MAX + 64];
static volatile sig_atomic_t made, nfiles;
static pid_t owner;
static const int cleanup_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};

void private_dir_remove(void) /* async-signal-safe */
{
	if (!made || getpid() != owner)
		return;
	for (int i = 0; i < nfiles; i++)
		unlink(files[i]);
	rmdir(dir);
	nfiles = 0;
	made = 0;
}

static void remove_and_reraise(int sig)
{
	private_dir_remove();
	signal(sig, SIG_DFL);
	raise(sig); /* delivered as the handler returns */
}

/* Once per process: the signal handlers (where the signal is not ignored)
 * and the exit hook. */
static void install_cleanup(void)
{
	static int installed;
	if (installed++)
		return;
	for (size_t i = 0; i < sizeof cleanup_signals / sizeof *cleanup_signals; i++) {
		struct sigaction sa, old;
		if (sigaction(cleanup_signals[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			continue;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = remove_and_reraise;
		sigfillset(&sa.sa_mask);
		sigaction(cleanup_signals[i], &sa, NULL);
	}
	atexit(private_dir_remove);
}

static sigset_t cleanup_set(void)
{
	sigset_t set;
	sigemptyset(&set);
	for (size_t i = 0; i < sizeof cleanup_signals / sizeof *cleanup_signals; i++)
		sigaddset(&set, cleanup_signals[i]);
	return set;
}

int private_dir_make(struct bctx *c)
{
	if (made)
		return 0;
	install_cleanup();
	snprintf(dir, sizeof dir, "%s/vmtax-XXXXXX", tmpdir_path);
	sigset_t set = cleanup_set(), old;
	sigprocmask(SIG_BLOCK, &set, &old); /* no signal between mkdtemp and `made` */
	int ok = mkdtemp(dir) != NULL, e = errno;
	if (ok) {
		owner = getpid();
		made = 1;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (!ok)
		return skipf(c, "cannot make a directory in %s: %s", tmpdir_path, strerror(e));
	return 0;
}

int private_file(struct bctx *c, const char *name, int flags, char *path, size_t cap)
{
	if (private_dir_make(c) != 0)
		return -1;
	if (nfiles == MAXFILES)
		return skipf(c, "more than %d private files", MAXFILES);
	const char *f = files[nfiles];
	snprintf(files[nfiles], sizeof files[0], "%s/%s", dir, name);
	nfiles++; /* recorded before it exists: removal never misses it */
	int fd = open(f, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return skipf(c, "cannot create %s: %s", f, strerror(errno));
	snprintf(path, cap, "%s", f);
	return fd;
}

int private_data_file(struct bctx *c, const char *name, size_t len)
{
	char path[PATH_CAP], buf[65536];
	int fd = private_file(c, name, O_RDWR, path, sizeof path);
	if (fd >= 0)
		unlink(path); /* the descriptor is all it takes */
	memset(buf, 'v', sizeof buf);
	for (size_t off = 0; fd >= 0 && off < len; off += sizeof buf) {
		size_t n = len - off < sizeof buf ? len - off : sizeof buf;
		ssize_t w = write(fd, buf, n);
		if (w != (ssize_t)n) {
			skipf(c, "cannot write %zu KiB in %s: %s", len >> 10, tmpdir_path,
			      w < 0 ? strerror(errno) : "disk full");
			close(fd);
			fd = -1;
		}
	}
	if (fd < 0)
		private_dir_remove();
	return fd;
}
