#!/bin/bash
# What a machine offers vmtax: KVM with hardware virtualization? hardware counters?
# Run from the repository root after `make setup` (it reads agent/build/vmtax-agent --env); prints only.
echo "== uname"; uname -a; nproc; grep -m1 "model name" /proc/cpuinfo
echo "== virt flags"; grep -o -w -E "svm|vmx|hypervisor|npt|ept" /proc/cpuinfo | sort | uniq -c
echo "== /dev/kvm"; ls -l /dev/kvm /dev/vhost-net 2>&1; grep -i kvm /proc/modules; ls /sys/module | grep -i kvm
for f in /sys/module/kvm*/parameters/*; do [ -r "$f" ] && echo "$f=$(cat $f 2>/dev/null)"; done 2>/dev/null | head -40
echo "== perf"; cat /proc/sys/kernel/perf_event_paranoid; ls /sys/bus/event_source/devices/ 2>&1
ls /sys/bus/event_source/devices/cpu/events 2>&1 | head -20
echo "== agent env"; agent/build/vmtax-agent --env | python3 -c 'import json,sys; d=json.loads(sys.stdin.readline()); print({k:d[k] for k in d if k!="cpu_flags"})'
echo "== agent counters"; agent/build/vmtax-agent --list-metrics 2>&1 | head -c 3000; echo
agent/build/vmtax-agent run getppid --samples 1 --count 2 2>&1 | tail -3
echo "== kvm ioctls"
python3 - <<'PY'
import os, fcntl
try:
    fd = os.open("/dev/kvm", os.O_RDWR)
except OSError as e:
    print("open /dev/kvm:", e); raise SystemExit
print("KVM_GET_API_VERSION", fcntl.ioctl(fd, 0xAE00))
for name, cap in [("USER_MEMORY", 3), ("SET_TSS_ADDR", 4), ("NR_VCPUS", 9), ("MAX_VCPUS", 66), ("PMU_CAPABILITY", 225)]:
    try: print("CHECK_EXTENSION", name, fcntl.ioctl(fd, 0xAE03, cap))
    except OSError as e: print(name, e)
try:
    vm = fcntl.ioctl(fd, 0xAE01, 0); print("KVM_CREATE_VM fd", vm)
except OSError as e: print("KVM_CREATE_VM", e)
PY
echo "== tools"; which qemu-system-x86_64 perf podman docker unshare 2>&1; cat /etc/os-release | head -3; ldd --version | head -1
echo "== cgroup/cpus"; cat /sys/fs/cgroup/cpu.max 2>&1; cat /proc/self/status | grep -i cpus_allowed_list
