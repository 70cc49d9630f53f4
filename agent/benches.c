/* The single table of benchmarks.  `vmtax-agent --list` prints it and the
 * Python side reads that; nothing else repeats the list. */
#include "harness.h"
#include "families.h"

#define CTX(np, kb)                                                            \
	{"ctx_" #np "p_" #kb "k", "lmbench", "ns", "lower",                    \
	 "lat_ctx -s " #kb " " #np ": one op = one hop of a 1-byte token round a ring of " #np \
	 " processes joined by pipes: the receiver wakes, sums its own " #kb " KB array and "  \
	 "writes the token on (context switch + pipe read/write + the sum); lmbench subtracts " \
	 "that pipe-and-sum overhead, timed in one process, and reports the switch alone "     \
	 "(with 4-byte tokens)",                                                               \
	 "fork, pipes", ctx_setup, ctx_run, ctx_teardown, NULL, np, kb, 0}

const struct bench benches[] = {
	/* VMware kernel microbenchmarks (seeds 000, 001) */
	{"getppid", "kernel", "ns", "lower",
	 "one op = one raw getppid system call (syscall(2), 10 per loop iteration): the "
	 "system-call entry/exit path",
	 "", getppid_setup, getppid_run, NULL, NULL, 0, 0, 0},
	{"divzero", "kernel", "ns", "lower",
	 "one op = a divl by zero: the #DE fault, SIGFPE delivery, a handler that steps past "
	 "the instruction, sigreturn",
	 "x86-64", divzero_setup, divzero_run, NULL, NULL, 0, 0, 0},
	{"segv", "kernel", "ns", "lower",
	 "one op = a 1-byte store to address 0 (unmapped): the page fault, SIGSEGV delivery, a "
	 "handler that steps past the store, sigreturn",
	 "x86-64", segv_setup, segv_run, NULL, NULL, 0, 0, 0},
	{"threadswitch", "kernel", "ns", "lower",
	 "one op = one switch between two threads of one process: half a round trip of a "
	 "1-byte token through two pipes (write, the peer's read wakes)",
	 "pthreads, pipes", threadswitch_setup, threadswitch_run, threadswitch_teardown, NULL, 0, 0, 0},
	{"forkwait", "kernel", "ns", "lower",
	 "one op = fork() a child that calls _exit(0) at once, and waitpid() for it (process "
	 "creation and teardown, address-space copy); this is also lmbench's \"fork proc\" "
	 "(lat_proc fork), whose child calls exit(1) and whose parent wait()s",
	 "fork", NULL, forkwait_run, NULL, NULL, 0, 0, 0},
	/* the anonymous zero-fill fault (lmbench's page fault row is page_fault_file) */
	{"page_fault", "kernel", "ns", "lower",
	 "one op = the first store to one page of a fresh anonymous private region (zero-fill "
	 "fault, THP off), at most 32768 pages per sample, the region mapped afresh before every "
	 "batch (untimed).  lmbench's lat_pagefault faults a file instead: see page_fault_file",
	 "", page_fault_setup, page_fault_run, page_fault_teardown, page_fault_reset, 32768, 0, 32768},
	/* lmbench rows of the seed 001 scoreboard */
	{"null_call", "lmbench", "ns", "lower", "lat_syscall null: one op = one getppid() through libc, as lmbench",
	 "", NULL, null_call_run, NULL, NULL, 0, 0, 0},
	{"null_read", "lmbench", "ns", "lower", "lat_syscall read: one op = one 1-byte read() of /dev/zero, as lmbench",
	 "/dev/zero", null_read_setup, null_read_run, fd_teardown, NULL, 0, 0, 0},
	{"null_write", "lmbench", "ns", "lower", "lat_syscall write: one op = one 1-byte write() to /dev/null, as lmbench",
	 "/dev/null", null_write_setup, null_write_run, fd_teardown, NULL, 0, 0, 0},
	{"stat", "lmbench", "ns", "lower", "lat_syscall stat: one op = one stat() of an empty file, <tmpdir>/vmtax-XXXXXX/stat "
	 "(the private directory; the tmpdir_fs fact of --env names its filesystem); lmbench's "
	 "script stats $FSDIR/lmbench (by default /usr/tmp/lat_fs/lmbench), and the number of "
	 "names in the path changes the lookup's cost",
	 "writable tmpdir", file_setup, stat_run, fd_teardown, NULL, 0, 0, 0},
	{"open_close", "lmbench", "ns", "lower", "lat_syscall open: one op = one open(O_RDONLY) and close() of the empty file that "
	 "stat uses, as lmbench",
	 "writable tmpdir", file_setup, open_close_run, fd_teardown, NULL, 0, 0, 0},
	{"select_tcp", "lmbench", "ns", "lower", "lat_select -n 100 tcp: one op = one select() with zero timeout on a read set of 100 "
	 "descriptors, all dup()s of one listening loopback TCP socket with no pending "
	 "connection, so none is ready (the set rebuilt before each call); lmbench passes a "
	 "write set of 100 dup()s of a connected socket instead, all ready, with nfds 100",
	 "loopback TCP", select_tcp_setup, select_tcp_run, fd_teardown, NULL, 100, 0, 0},
	{"sig_install", "lmbench", "ns", "lower", "lat_sig install: one op = one sigaction() installing a SIGUSR1 handler (lmbench "
	 "also fetches the old action)",
	 "", NULL, sig_install_run, NULL, NULL, 0, 0, 0},
	{"sig_handle", "lmbench", "ns", "lower", "lat_sig catch: one op = kill(getpid(), SIGUSR1) and the run of its handler (send, "
	 "delivery, a handler that counts, sigreturn); lmbench subtracts the cost of "
	 "kill(getpid(), 0) and reports the catch alone",
	 "", sig_handle_setup, sig_handle_run, NULL, NULL, 0, 0, 0},
	{"fork_exec", "lmbench", "ns", "lower", "lat_proc exec: one op = fork(), exec of the static agent (--exit, which returns at "
	 "once) and waitpid(); lmbench's exec proc runs a dynamically linked hello, so its figure "
	 "includes the dynamic loader's work, which this has none of",
	 "fork, exec", NULL, fork_exec_run, NULL, NULL, 0, 0, 0},
	{"fork_sh", "lmbench", "ns", "lower", "lat_proc shell: one op = fork(), exec of the target's own /bin/sh (the sh fact of "
	 "--env names it) -c '<static agent> --exit', and waitpid(); lmbench's shell proc has "
	 "/bin/sh run a dynamically linked hello instead",
	 "/bin/sh", fork_sh_setup, fork_sh_run, free_priv, NULL, 0, 0, 0},
	CTX(2, 0), CTX(2, 16), CTX(2, 64), CTX(8, 16), CTX(8, 64), CTX(16, 16), CTX(16, 64),
	{"mmap", "lmbench", "ns", "lower",
	 "lat_mmap 8m: one op = mmap() of an 8 MiB file PROT_READ|PROT_WRITE MAP_SHARED, a 1-byte "
	 "store every 16 KiB over the first tenth of the mapping (52 stores), munmap(); as "
	 "lmbench, the file (in the private tmpdir, written in setup) in the page cache",
	 "writable tmpdir with 8 MiB free", mmap_setup, mmap_run, mmap_teardown, NULL, 8192, 0, 0},
	{"prot_fault", "lmbench", "ns", "lower",
	 "lat_sig prot: one op = a 1-byte store to a read-only anonymous private page: the "
	 "protection fault, SIGSEGV delivery, a handler that steps past the store, sigreturn; "
	 "lmbench maps a file read-only MAP_SHARED, lets the store fault again and again, and "
	 "subtracts its lat_sig catch time, reporting the fault alone",
	 "x86-64", prot_fault_setup, prot_fault_run, prot_fault_teardown, NULL, 0, 0, 0},
	{"page_fault_file", "lmbench", "ns", "lower",
	 "lat_pagefault: one op = the first 1-byte read of one page of a 16384-page file (64 MiB "
	 "with 4 KiB pages) in the private tmpdir, its pages in the page cache, mapped PROT_READ "
	 "MAP_SHARED afresh before every batch (untimed), pages read in a fixed pseudo-random "
	 "permutation; at most 16384 per sample.  The kernel's fault-around maps up to 16 cached "
	 "pages (fault_around_bytes, 64 KiB) per fault, so there are fewer faults than ops, as "
	 "in lmbench, which reads in random order too but times the remapping and subtracts a "
	 "separately timed mmap/munmap loop",
	 "writable tmpdir with 64 MiB free", page_fault_file_setup, page_fault_file_run,
	 page_fault_teardown, page_fault_file_reset, 16384, 0, 16384},
	/* seed 004: PI with the cycle counter */
	{"pi", "cpu", "ns", "lower",
	 "one op = PI to 500 digits (Rabinowitz-Wagon spigot); samples also carry TSC cycles",
	 "", pi_setup, pi_run, pi_teardown, NULL, 500, 0, 0},
	/* instructions that exit to the hypervisor */
	{"cpuid", "exits", "ns", "lower",
	 "one op = one CPUID of leaf 0: always a VM exit under hardware virtualization (the "
	 "world-switch cost)",
	 "x86", x86_setup, cpuid_run, NULL, NULL, 0, 0, 0},
	{"rdtsc", "exits", "ns", "lower",
	 "one op = one RDTSC: normally no VM exit (TSC offsetting); the control for cpuid",
	 "x86", x86_setup, rdtsc_run, NULL, NULL, 0, 0, 0},
	/* TLB pressure */
	{"tlb_4k", "mem", "ns", "lower",
	 "one op = one dependent load of a random pointer chase that visits each 4 KiB page of a "
	 "64 MiB region (16384 pages, THP off) once per lap, at a random cache line of it: far "
	 "beyond the TLB's reach, so nearly every load misses the TLB and walks the page tables "
	 "(two-dimensional under nested paging); skipped when MemAvailable is under 128 MiB",
	 "128 MiB of MemAvailable", tlb_setup, tlb_run, tlb_teardown, NULL, 64, 4, 0},
	{"tlb_2m", "mem", "ns", "lower",
	 "one op = one load of the tlb_4k chase over the same 64 MiB backed by 2 MiB pages (hugetlbfs, else THP): 32 "
	 "pages, within the TLB's reach, so the loads miss caches as in tlb_4k but not the TLB; "
	 "the difference is the page walk; skipped when MemAvailable is under 128 MiB",
	 "128 MiB of MemAvailable, 2 MiB pages", tlb_setup, tlb_run, tlb_teardown, NULL, 64, 2, 0},
};

const size_t nbenches = sizeof benches / sizeof benches[0];
