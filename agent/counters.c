/* What one operation costs inside the target, besides its time: counters
 * read around every timed batch and divided by its operations.
 *
 * perf_event_open(2) counts for the agent process and, inherited, for every
 * thread and child a benchmark makes in its setup (the ring of lat_ctx, the
 * peer thread of threadswitch, the children of forkwait), enabled right
 * before the batch's first clock read and disabled right after its last, so
 * setup and reset are never counted.  Software events exist wherever the
 * kernel has perf events; hardware ones only where a PMU is exposed (none
 * under TCG, a virtual one under KVM with -cpu host).  Where perf is missing
 * (User-mode Linux has no CONFIG_PERF_EVENTS; a container's seccomp filter
 * may refuse it), page faults and context switches come from getrusage(2),
 * which also gives every target the user/system split of the CPU time. */
#define _GNU_SOURCE
#include "counters.h"
#include "harness.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HW_CACHE(id, op, res) ((id) | ((op) << 8) | ((res) << 16))

static const struct counter_def {
	const char *name;
	uint32_t type;
	uint64_t config;
	int user_only;
} defs[NCOUNTERS] = {
	{"page_faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS, 0},
	{"context_switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, 0},
	{"cpu_migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS, 0},
	{"task_clock_ns", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, 0},
	{"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, 0},
	{"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, 0},
	{"cycles_user", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, 1},
	{"instructions_user", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, 1},
	{"dtlb_misses", PERF_TYPE_HW_CACHE,
	 HW_CACHE(PERF_COUNT_HW_CACHE_DTLB, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS), 0},
	{"llc_misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES, 0},
	{"syscalls", PERF_TYPE_TRACEPOINT, 0 /* the id of raw_syscalls:sys_enter */, 0},
};

long tracepoint_id = -1; /* --tracepoint-id: where the agent cannot read tracefs itself */

/* The id of raw_syscalls:sys_enter: given, or read from tracefs. */
static long syscall_tracepoint(char *why, size_t cap)
{
	static const char *const paths[] = {"/sys/kernel/tracing/events/raw_syscalls/sys_enter/id",
					    "/sys/kernel/debug/tracing/events/raw_syscalls/sys_enter/id"};
	if (tracepoint_id >= 0)
		return tracepoint_id;
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
		FILE *f = fopen(paths[i], "r");
		long id = -1;
		if (!f)
			continue;
		if (fscanf(f, "%ld", &id) != 1)
			id = -1;
		fclose(f);
		if (id >= 0)
			return id;
	}
	snprintf(why, cap, "no tracefs with raw_syscalls:sys_enter (not mounted?)");
	return -1;
}

/* The figures getrusage gives, in the order of rusage_names. */
static const char *const rusage_names[NRUSAGE] = {"cpu_user_ns", "cpu_sys_ns", "page_faults",
						   "context_switches"};

static int open_one(const struct counter_def *d, char *why, size_t cap)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof a);
	a.size = sizeof a;
	a.type = d->type;
	a.config = d->config;
	if (d->type == PERF_TYPE_TRACEPOINT) {
		long id = syscall_tracepoint(why, cap);
		if (id < 0)
			return -1;
		a.config = (uint64_t)id;
	}
	a.disabled = 1;
	a.inherit = 1;
	a.exclude_hv = 1;
	a.exclude_kernel = d->user_only ? 1 : 0;
	a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
	int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		const char *hint = errno == ENOENT || errno == EOPNOTSUPP ? " (no such counter here)"
				   : errno == ENOSYS ? " (no perf events in this kernel)"
				   : errno == EACCES || errno == EPERM ? " (not permitted: perf_event_paranoid, seccomp)"
				   : "";
		snprintf(why, cap, "%s%s", strerror(errno), hint);
	}
	return fd;
}

void counters_open(struct counters *k, int enabled)
{
	memset(k, 0, sizeof *k);
	k->enabled = enabled;
	for (int i = 0; i < NCOUNTERS; i++) {
		k->fd[i] = -1;
		if (enabled)
			k->fd[i] = open_one(&defs[i], k->why[i], sizeof k->why[i]);
		else
			snprintf(k->why[i], sizeof k->why[i], "counting off (--no-counters)");
	}
}

void counters_close(struct counters *k)
{
	for (int i = 0; i < NCOUNTERS; i++)
		if (k->fd[i] >= 0) {
			close(k->fd[i]);
			k->fd[i] = -1;
		}
}

/* A counter's value so far, scaled when the PMU multiplexed it (it ran for
 * only part of the time it was enabled); -1 if unreadable. */
static double read_one(int fd)
{
	uint64_t v[3];
	if (fd < 0 || read(fd, v, sizeof v) != (ssize_t)sizeof v)
		return -1;
	if (v[2] == 0)
		return v[1] ? -1 : 0; /* enabled but never scheduled onto the PMU */
	return v[2] < v[1] ? (double)v[0] * (double)v[1] / (double)v[2] : (double)v[0];
}

static void rusage_now(double out[NRUSAGE])
{
	struct rusage self, kids;
	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &kids);
	out[0] = (double)(self.ru_utime.tv_sec + kids.ru_utime.tv_sec) * 1e9 +
		 (double)(self.ru_utime.tv_usec + kids.ru_utime.tv_usec) * 1e3;
	out[1] = (double)(self.ru_stime.tv_sec + kids.ru_stime.tv_sec) * 1e9 +
		 (double)(self.ru_stime.tv_usec + kids.ru_stime.tv_usec) * 1e3;
	out[2] = (double)(self.ru_minflt + self.ru_majflt + kids.ru_minflt + kids.ru_majflt);
	out[3] = (double)(self.ru_nvcsw + self.ru_nivcsw + kids.ru_nvcsw + kids.ru_nivcsw);
}

void counters_start(struct counters *k)
{
	if (!k->enabled)
		return;
	rusage_now(k->ru0);
	for (int i = 0; i < NCOUNTERS; i++)
		k->v0[i] = read_one(k->fd[i]);
	for (int i = 0; i < NCOUNTERS; i++)
		if (k->fd[i] >= 0)
			ioctl(k->fd[i], PERF_EVENT_IOC_ENABLE, 0);
}

void counters_stop(struct counters *k)
{
	if (!k->enabled)
		return;
	for (int i = 0; i < NCOUNTERS; i++)
		if (k->fd[i] >= 0)
			ioctl(k->fd[i], PERF_EVENT_IOC_DISABLE, 0);
	for (int i = 0; i < NCOUNTERS; i++) {
		double v = read_one(k->fd[i]);
		k->delta[i] = v >= 0 && k->v0[i] >= 0 ? v - k->v0[i] : -1;
	}
	double ru[NRUSAGE];
	rusage_now(ru);
	for (int i = 0; i < NRUSAGE; i++)
		k->ru_delta[i] = ru[i] - k->ru0[i];
}

static int perf_index(const char *name)
{
	for (int i = 0; i < NCOUNTERS; i++)
		if (!strcmp(defs[i].name, name))
			return i;
	return -1;
}

size_t counters_json(const struct counters *k, double ops, char *buf, size_t cap)
{
	size_t o = 0;
	if (!k->enabled || ops <= 0 || cap < 16)
		return 0;
	o += (size_t)snprintf(buf + o, cap - o, ",\"metrics\":{");
	int first = 1;
	for (int i = 0; i < NCOUNTERS && o < cap; i++) {
		if (k->fd[i] < 0 || k->delta[i] < 0)
			continue;
		o += (size_t)snprintf(buf + o, cap - o, "%s\"%s\":%.6g", first ? "" : ",", defs[i].name,
				      k->delta[i] / ops);
		first = 0;
	}
	for (int i = 0; i < NRUSAGE && o < cap; i++) {
		int p = perf_index(rusage_names[i]);
		if (p >= 0 && k->fd[p] >= 0 && k->delta[p] >= 0)
			continue; /* perf's own count is finer (it sees ring members alive) */
		o += (size_t)snprintf(buf + o, cap - o, "%s\"%s\":%.6g", first ? "" : ",", rusage_names[i],
				      k->ru_delta[i] / ops);
		first = 0;
	}
	if (o < cap)
		o += (size_t)snprintf(buf + o, cap - o, "}");
	return o < cap ? o : 0;
}

const char *counters_source(const struct counters *k, int i, char *buf, size_t cap)
{
	if (k->fd[i] >= 0)
		return "perf";
	int r;
	for (r = 0; r < NRUSAGE; r++)
		if (!strcmp(rusage_names[r], defs[i].name))
			break;
	if (r < NRUSAGE && k->enabled)
		snprintf(buf, cap, "getrusage (perf: %s)", k->why[i]);
	else
		snprintf(buf, cap, "not counted: %s", k->why[i]);
	return buf;
}

const char *counter_name(int i)
{
	return defs[i].name;
}

size_t counters_names_json(char *buf, size_t cap)
{
	size_t o = (size_t)snprintf(buf, cap, "[");
	for (int i = 0; i < NCOUNTERS + NRUSAGE && o < cap; i++) {
		const char *name = i < NCOUNTERS ? defs[i].name : rusage_names[i - NCOUNTERS];
		if (i >= NCOUNTERS && perf_index(name) >= 0)
			continue; /* a figure both give is one name */
		o += (size_t)snprintf(buf + o, cap - o, "%s\"%s\"", i ? "," : "", name);
	}
	if (o < cap)
		o += (size_t)snprintf(buf + o, cap - o, "]");
	return o < cap ? o : 0;
}
