/* Fault paths: hardware faults turned into signals and resumed (VMware's
 * divzero and segv), lmbench's signal-handling and protection-fault rows.
 * Page faults proper are in pagefault.c. */
#define _GNU_SOURCE
#include "harness.h"
#include "families.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__x86_64__)
/* The handler resumes after the faulting instruction.  It checks the bytes
 * it skips, so a fault anywhere else is never silently stepped over. */
static const unsigned char DIV_ECX[] = {0xf7, 0xf1};        /* divl %ecx */
static const unsigned char MOVB_RDI[] = {0xc6, 0x07, 0x00}; /* movb $0,(%rdi) */

static void resume_handler(int sig, siginfo_t *si, void *uc_)
{
	(void)si;
	ucontext_t *uc = uc_;
	unsigned char *ip = (unsigned char *)uc->uc_mcontext.gregs[REG_RIP];
	const unsigned char *want = sig == SIGFPE ? DIV_ECX : MOVB_RDI;
	size_t len = sig == SIGFPE ? sizeof DIV_ECX : sizeof MOVB_RDI;
	if (memcmp(ip, want, len) != 0) {
		signal(sig, SIG_DFL);
		return; /* re-fault with the default action: a real crash */
	}
	uc->uc_mcontext.gregs[REG_RIP] += (greg_t)len;
}

static int install(struct bctx *c, int sig)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = resume_handler;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	if (sigaction(sig, &sa, NULL) != 0)
		return skipf(c, "sigaction: %s", strerror(errno));
	return 0;
}

static inline void fault_write(volatile void *p)
{
	__asm__ __volatile__("movb $0, (%%rdi)" : : "D"(p) : "memory");
}

int divzero_setup(struct bctx *c) { return install(c, SIGFPE); }

void trace_mark(void)
{
	struct sigaction sa, old;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = resume_handler;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	if (sigaction(SIGFPE, &sa, &old) != 0)
		die("--trace-marks: sigaction: %s", strerror(errno));
	unsigned q, r, a = TRACE_MARK_LEAF, b, cx = 0, d;
	__asm__ __volatile__("divl %%ecx" : "=a"(q), "=d"(r) : "a"(1u), "d"(0u), "c"(0u) : "memory");
	__asm__ __volatile__("cpuid" : "+a"(a), "=b"(b), "+c"(cx), "=d"(d) : : "memory");
	sigaction(SIGFPE, &old, NULL);
}

void divzero_run(struct bctx *c, uint64_t iters)
{
	(void)c;
	for (uint64_t i = 0; i < iters; i++) {
		unsigned q, r;
		__asm__ __volatile__("divl %%ecx"
				     : "=a"(q), "=d"(r)
				     : "a"(1u), "d"(0u), "c"(0u)
				     : "memory");
	}
}

int segv_setup(struct bctx *c) { return install(c, SIGSEGV); }

void segv_run(struct bctx *c, uint64_t iters)
{
	(void)c;
	for (uint64_t i = 0; i < iters; i++)
		fault_write((volatile void *)0);
}

int prot_fault_setup(struct bctx *c)
{
	long pg = sysconf(_SC_PAGESIZE);
	void *p = mmap(NULL, (size_t)pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return skipf(c, "mmap: %s", strerror(errno));
	c->priv = p;
	return install(c, SIGSEGV);
}

void prot_fault_run(struct bctx *c, uint64_t iters)
{
	for (uint64_t i = 0; i < iters; i++)
		fault_write(c->priv);
}

void prot_fault_teardown(struct bctx *c)
{
	munmap(c->priv, (size_t)sysconf(_SC_PAGESIZE));
}
#else
void trace_mark(void) {}
int divzero_setup(struct bctx *c) { return skipf(c, "needs x86-64"); }
int segv_setup(struct bctx *c) { return skipf(c, "needs x86-64"); }
int prot_fault_setup(struct bctx *c) { return skipf(c, "needs x86-64"); }
void divzero_run(struct bctx *c, uint64_t iters) { (void)c; (void)iters; }
void segv_run(struct bctx *c, uint64_t iters) { (void)c; (void)iters; }
void prot_fault_run(struct bctx *c, uint64_t iters) { (void)c; (void)iters; }
void prot_fault_teardown(struct bctx *c) { (void)c; }
#endif

/* lmbench "sig hndl": send SIGUSR1 to ourselves and run its handler. */
static volatile sig_atomic_t caught;
static void count_handler(int sig) { (void)sig; caught++; }

int sig_handle_setup(struct bctx *c)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = count_handler;
	if (sigaction(SIGUSR1, &sa, NULL) != 0)
		return skipf(c, "sigaction: %s", strerror(errno));
	return 0;
}

void sig_handle_run(struct bctx *c, uint64_t iters)
{
	(void)c;
	pid_t me = getpid();
	for (uint64_t i = 0; i < iters; i++)
		kill(me, SIGUSR1);
}
