/* Entry points of every benchmark family; the table in benches.c is the
 * only place that names them together. */
#ifndef VMTAX_FAMILIES_H
#define VMTAX_FAMILIES_H
#include "harness.h"

/* syscall.c */
int getppid_setup(struct bctx *);
void getppid_run(struct bctx *, uint64_t);
void null_call_run(struct bctx *, uint64_t);
int null_read_setup(struct bctx *);
int null_write_setup(struct bctx *);
void null_read_run(struct bctx *, uint64_t);
void null_write_run(struct bctx *, uint64_t);
int file_setup(struct bctx *);
void stat_run(struct bctx *, uint64_t);
void open_close_run(struct bctx *, uint64_t);
int select_tcp_setup(struct bctx *);
void select_tcp_run(struct bctx *, uint64_t);
void fd_teardown(struct bctx *);
void sig_install_run(struct bctx *, uint64_t);
/* faults.c */
int divzero_setup(struct bctx *);
void divzero_run(struct bctx *, uint64_t);
int segv_setup(struct bctx *);
void segv_run(struct bctx *, uint64_t);
int prot_fault_setup(struct bctx *);
void prot_fault_run(struct bctx *, uint64_t);
void prot_fault_teardown(struct bctx *);
int sig_handle_setup(struct bctx *);
void sig_handle_run(struct bctx *, uint64_t);
/* pagefault.c */
int page_fault_setup(struct bctx *);
void page_fault_reset(struct bctx *);
void page_fault_run(struct bctx *, uint64_t);
void page_fault_teardown(struct bctx *);
int page_fault_file_setup(struct bctx *);
void page_fault_file_reset(struct bctx *);
void page_fault_file_run(struct bctx *, uint64_t);
/* procs.c */
void forkwait_run(struct bctx *, uint64_t);
void fork_exec_run(struct bctx *, uint64_t);
int fork_sh_setup(struct bctx *);
void fork_sh_run(struct bctx *, uint64_t);
void free_priv(struct bctx *);
/* ctxsw.c */
int threadswitch_setup(struct bctx *);
void threadswitch_run(struct bctx *, uint64_t);
void threadswitch_teardown(struct bctx *);
int ctx_setup(struct bctx *);
void ctx_run(struct bctx *, uint64_t);
void ctx_teardown(struct bctx *);
/* mem.c */
int mmap_setup(struct bctx *);
void mmap_run(struct bctx *, uint64_t);
void mmap_teardown(struct bctx *);
int tlb_setup(struct bctx *);
void tlb_run(struct bctx *, uint64_t);
void tlb_teardown(struct bctx *);
/* cpu.c */
int pi_setup(struct bctx *);
void pi_run(struct bctx *, uint64_t);
void pi_teardown(struct bctx *);
/* exits.c */
int x86_setup(struct bctx *);
void cpuid_run(struct bctx *, uint64_t);
void rdtsc_run(struct bctx *, uint64_t);

/* envinfo.c */
void print_env(void);
#endif
