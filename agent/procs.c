/* Process creation: VMware's forkwait and lmbench's fork/exec/sh rows. */
#define _GNU_SOURCE
#include "harness.h"
#include "families.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void reap(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid: %s", strerror(errno));
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("child %d did not exit cleanly (status 0x%x)", (int)pid, st);
}

static pid_t fork_or_die(void)
{
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	return pid;
}

/* forkwait (also lmbench's fork proc): fork a child that exits at once, wait. */
void forkwait_run(struct bctx *c, uint64_t iters)
{
	(void)c;
	for (uint64_t i = 0; i < iters; i++) {
		pid_t pid = fork_or_die();
		if (pid == 0)
			_exit(0);
		reap(pid);
	}
}

/* fork_exec: fork, exec this (static) agent with --exit, wait. */
void fork_exec_run(struct bctx *c, uint64_t iters)
{
	(void)c;
	const char *exe = self_exe();
	for (uint64_t i = 0; i < iters; i++) {
		pid_t pid = fork_or_die();
		if (pid == 0) {
			execl(exe, "vmtax-agent", "--exit", (char *)NULL);
			_exit(127);
		}
		reap(pid);
	}
}

/* fork_sh: fork, exec /bin/sh -c "<agent> --exit", wait (lmbench sh proc). */
struct shstate {
	char cmd[4200];
};

int fork_sh_setup(struct bctx *c)
{
	if (access("/bin/sh", X_OK) != 0)
		return skipf(c, "no /bin/sh on this system");
	struct shstate *s = malloc(sizeof *s);
	snprintf(s->cmd, sizeof s->cmd, "%s --exit", self_exe());
	c->priv = s;
	return 0;
}

void fork_sh_run(struct bctx *c, uint64_t iters)
{
	struct shstate *s = c->priv;
	for (uint64_t i = 0; i < iters; i++) {
		pid_t pid = fork_or_die();
		if (pid == 0) {
			execl("/bin/sh", "sh", "-c", s->cmd, (char *)NULL);
			_exit(127);
		}
		reap(pid);
	}
}

void free_priv(struct bctx *c)
{
	free(c->priv);
	c->priv = NULL;
}
