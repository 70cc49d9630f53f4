/* `vmtax-agent --env`: the facts of the system the agent runs on, read from
 * inside it (so a guest reports itself), as one JSON line. */
#define _GNU_SOURCE
#include "harness.h"
#include "families.h"
#include "counters.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <unistd.h>

struct jbuf {
	char *s;
	size_t len, cap;
};

static void jput(struct jbuf *j, const char *t)
{
	size_t n = strlen(t);
	if (j->len + n + 1 > j->cap) {
		j->cap = (j->len + n + 1) * 2;
		j->s = realloc(j->s, j->cap);
	}
	memcpy(j->s + j->len, t, n + 1);
	j->len += n;
}

static void jkv(struct jbuf *j, const char *k, const char *v)
{
	char esc[8192];
	jput(j, ",\"");
	jput(j, k);
	if (!v) {
		jput(j, "\":null");
		return;
	}
	json_escape(esc, sizeof esc, v);
	jput(j, "\":\"");
	jput(j, esc);
	jput(j, "\"");
}

static void jkl(struct jbuf *j, const char *k, long v)
{
	char t[64];
	snprintf(t, sizeof t, ",\"%s\":%ld", k, v);
	jput(j, t);
}

/* First line of a file, without its newline; NULL if unreadable. */
static char *read_line(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	char *r = fgets(buf, (int)cap, f);
	fclose(f);
	if (!r)
		return NULL;
	buf[strcspn(buf, "\n")] = 0;
	return buf;
}

static char *cpuinfo_field(const char *key, char *buf, size_t cap)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	static char line[8192];
	size_t kl = strlen(key);
	if (!f)
		return NULL;
	char *found = NULL;
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, key, kl) == 0 && (line[kl] == '\t' || line[kl] == ' ' || line[kl] == ':')) {
			char *v = strchr(line, ':');
			if (!v)
				continue;
			v++;
			while (*v == ' ')
				v++;
			v[strcspn(v, "\n")] = 0;
			snprintf(buf, cap, "%s", v);
			found = buf;
			break;
		}
	}
	fclose(f);
	return found;
}

static void cpuid_facts(struct jbuf *j)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned a = 1, b, c = 0, d;
	__asm__ __volatile__("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
	int hv = (c >> 31) & 1;
	if (c & (1u << 26)) { /* XSAVE: size of the area for the enabled features */
		unsigned xa = 0xd, xb, xc = 0, xd;
		__asm__ __volatile__("cpuid" : "+a"(xa), "=b"(xb), "+c"(xc), "=d"(xd));
		jkl(j, "xsave_bytes", (long)xb);
	}
	jkl(j, "cpuid_hypervisor_bit", hv);
	if (hv) {
		unsigned sig[3];
		a = 0x40000000;
		c = 0;
		__asm__ __volatile__("cpuid" : "+a"(a), "=b"(sig[0]), "+c"(c), "=d"(d));
		sig[1] = c;
		sig[2] = d;
		char vendor[13];
		memcpy(vendor, sig, 12);
		vendor[12] = 0;
		for (int i = 0; i < 12; i++)
			if (vendor[i] && (vendor[i] < 0x20 || vendor[i] > 0x7e))
				vendor[i] = '?';
		jkv(j, "hypervisor_vendor", vendor);
	} else {
		jkv(j, "hypervisor_vendor", NULL);
	}
#else
	jkv(j, "hypervisor_vendor", NULL);
#endif
}

static void mitigations(struct jbuf *j)
{
	const char *dir = "/sys/devices/system/cpu/vulnerabilities";
	DIR *d = opendir(dir);
	jput(j, ",\"mitigations\":{");
	if (d) {
		struct dirent *e;
		int first = 1;
		char path[1024], buf[512], esc[1024];
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
			if (!read_line(path, buf, sizeof buf))
				continue;
			json_escape(esc, sizeof esc, buf);
			jput(j, first ? "\"" : ",\"");
			jput(j, e->d_name);
			jput(j, "\":\"");
			jput(j, esc);
			jput(j, "\"");
			first = 0;
		}
		closedir(d);
	}
	jput(j, "}");
}

static char *detect_virt(char *buf, size_t cap)
{
	const char *paths[] = {"/usr/bin/systemd-detect-virt", "/bin/systemd-detect-virt"};
	for (size_t i = 0; i < 2; i++) {
		if (access(paths[i], X_OK) != 0)
			continue;
		char cmd[128];
		snprintf(cmd, sizeof cmd, "%s 2>/dev/null", paths[i]);
		FILE *p = popen(cmd, "r");
		if (!p)
			return NULL;
		char *r = fgets(buf, (int)cap, p);
		pclose(p);
		if (!r)
			return NULL;
		buf[strcspn(buf, "\n")] = 0;
		return buf;
	}
	return NULL;
}

/* The filesystem under --tmpdir, by statfs(2) f_type (linux/magic.h). */
static const struct {
	unsigned long magic;
	const char *name;
} filesystems[] = {
	{0x01021994, "tmpfs"},    {0xef53, "ext2/3/4"},     {0x58465342, "xfs"},
	{0x9123683e, "btrfs"},    {0x794c7630, "overlay"},  {0x01021997, "9p"},
	{0x65735546, "fuse"},     {0x6969, "nfs"},          {0x73717368, "squashfs"},
	{0x858458f6, "ramfs"},    {0x00c0ffee, "hostfs"},   {0x2fc12fc1, "zfs"},
	{0xf2f52010, "f2fs"},     {0x4d44, "vfat"},         {0x2011bab0, "exfat"},
	{0xff534d42, "cifs"},     {0xfe534d42, "smb2"},     {0x00c36400, "ceph"},
	{0x958458f6, "hugetlbfs"}, {0xf15f, "ecryptfs"},    {0xca451a4e, "bcachefs"},
	{0x5346544e, "ntfs"},     {0x3153464a, "jfs"},      {0x52654973, "reiserfs"},
};

static const char *fs_name(const char *path, char *buf, size_t cap)
{
	struct statfs st;
	if (statfs(path, &st) != 0)
		return NULL;
	unsigned long magic = (unsigned long)st.f_type & 0xffffffffUL;
	for (size_t i = 0; i < sizeof filesystems / sizeof *filesystems; i++)
		if (filesystems[i].magic == magic)
			return filesystems[i].name;
	snprintf(buf, cap, "0x%lx", magic);
	return buf;
}

/* Where the benchmarks' files go, and which shell fork_sh runs. */
static void files_and_shell(struct jbuf *j)
{
	char b[PATH_MAX];
	jkv(j, "tmpdir", tmpdir_path);
	jkv(j, "tmpdir_fs", fs_name(tmpdir_path, b, sizeof b));
	jkv(j, "sh", realpath("/bin/sh", b));
}

/* Where each counter comes from here, said once per target: "perf",
 * "getrusage (perf: why not)" or "not counted: why" -- and whether a PMU is
 * exposed at all (a guest under TCG has none). */
static void counter_facts(struct jbuf *j)
{
	struct counters k;
	char buf[160], esc[400];
	counters_open(&k, 1);
	jput(j, ",\"counters\":{");
	for (int i = 0; i < NCOUNTERS; i++) {
		json_escape(esc, sizeof esc, counters_source(&k, i, buf, sizeof buf));
		jput(j, i ? ",\"" : "\"");
		jput(j, counter_name(i));
		jput(j, "\":\"");
		jput(j, esc);
		jput(j, "\"");
	}
	jput(j, "}");
	int pmu = 0;
	for (int i = 0; i < NCOUNTERS; i++)
		if (!strcmp(counter_name(i), "cycles"))
			pmu = k.fd[i] >= 0;
	jkl(j, "pmu", pmu);
	counters_close(&k);
}

void print_env(void)
{
	struct jbuf j = {0};
	struct utsname u;
	char b[8192];
	char sched_path[] = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor";
	uname(&u);
	jput(&j, "{\"schema\":1,\"type\":\"env\"");
	jkv(&j, "agent_version", AGENT_VERSION);
	jkv(&j, "hostname", u.nodename);
	jkv(&j, "kernel", u.release);
	jkv(&j, "kernel_version", u.version);
	jkv(&j, "machine", u.machine);
	jkv(&j, "cpu_model", cpuinfo_field("model name", b, sizeof b));
	jkv(&j, "cpu_flags", cpuinfo_field("flags", b, sizeof b));
	jkl(&j, "cpus_online", sysconf(_SC_NPROCESSORS_ONLN));
	jkl(&j, "mem_total_kb", sysconf(_SC_PHYS_PAGES) * (sysconf(_SC_PAGESIZE) / 1024));
	cpuid_facts(&j);
	jkv(&j, "sys_hypervisor_type", read_line("/sys/hypervisor/type", b, sizeof b));
	jkv(&j, "dmi_sys_vendor", read_line("/sys/class/dmi/id/sys_vendor", b, sizeof b));
	jkv(&j, "dmi_product_name", read_line("/sys/class/dmi/id/product_name", b, sizeof b));
	jkv(&j, "systemd_detect_virt", detect_virt(b, sizeof b));
	jkv(&j, "clocksource", read_line("/sys/devices/system/clocksource/clocksource0/current_clocksource", b, sizeof b));
	jkv(&j, "thp_enabled", read_line("/sys/kernel/mm/transparent_hugepage/enabled", b, sizeof b));
	jkv(&j, "cpu_governor", read_line(sched_path, b, sizeof b));
	files_and_shell(&j);
	mitigations(&j);
	counter_facts(&j);
	jput(&j, "}\n");
	emit_line(j.s);
	free(j.s);
}
