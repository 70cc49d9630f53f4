#!/bin/sh
# What the Xen rig runs inside its outer guest (scripts/xen-rig/rig.py): the
# host's root filesystem, read-only under a tmpfs.
#   mode xen:  this kernel is Xen's PV dom0.  Xen's toolstack (the tools tree
#              the rig extracted from Debian's packages) is copied in and
#              started; vmtax compares PV and PVH domUs with dom0 (`local`),
#              then explains (hypercalls per op, from xentrace).
#   mode bare: the same kernel on the same emulated machine, no Xen: the
#              baseline's figures.
# Each step's status goes to OUT/status; the rig checks the figures on the host.
# Usage: inside.sh MODE OUT  (OUT/rig.env: REPO, CACHE, XENROOT, BENCH, CPUID_BENCH, ARGS)
mode=$1 out=$2
. "$out/rig.env"
cd "$REPO" || { echo "cd-$mode 2" >>"$out/status"; exit 2; }
export PYTHONDONTWRITEBYTECODE=1 XDG_CACHE_HOME="$CACHE" VMTAX_DB=/tmp/vmtax-rig.db
export VMTAX_XENTRACE_KEEP="$out"  # each counting process's trace, for the decoder's tests (tests/data)
step() { echo "$1 $2" >>"$out/status"; }
vmtax=.venv/bin/vmtax

if [ "$mode" = bare ]; then
  echo "xen rig: bare Linux: vmtax run --target local --bench $BENCH $CPUID_BENCH $ARGS --max-time 2m"
  # shellcheck disable=SC2086  # word lists
  $vmtax run --target local --bench $BENCH $CPUID_BENCH $ARGS --max-time 2m --json "$out/bare.json" >/dev/null
  step bare $?
  cp "$VMTAX_DB" "$out/bare.db" 2>/dev/null
  exit 0
fi

cp -a "$XENROOT/." / || { step toolstack 1; exit 1; }
export PATH="/usr/lib/xen-4.17/bin:$PATH"
mount -t xenfs xenfs /proc/xen || { step toolstack 2; exit 1; }
mkdir -p /var/run/xen /var/lib/xen /var/log/xen /run/xenstored /tmp/xenlogs
xenstored --pid-file /run/xenstored.pid && xen-init-dom0 >/dev/null &&
  xenconsoled --pid-file=/run/xenconsoled.pid --log=guest --log-dir=/tmp/xenlogs &&
  xl info >"$out/xl-info.txt"
step toolstack $?
echo "xen rig: Xen $(sed -n 's/^xen_version *: //p' "$out/xl-info.txt"), $(sed -n 's/^xen_scheduler *: //p' "$out/xl-info.txt") scheduler; dom0 on pCPU 0, the domUs on pCPU 1"

# Every target times the baseline's iteration count: the slowest target of a
# row is its baseline (a PV guest's getppid is ~40x the others' under TCG,
# a PVH guest's CPUID an exit of ~0.1 ms against ~20 ns natively).
echo "xen rig: vmtax compare xen:type=pv local xen:type=pvh --bench $BENCH $ARGS --max-time $MAX_TIME"
# shellcheck disable=SC2086
$vmtax compare xen:type=pv local xen:type=pvh --bench $BENCH $ARGS --max-time "$MAX_TIME" --pairing blocks --explain --json "$out/compare.json"
step compare $?
$vmtax explain --json "$out/explain.json" >/dev/null
step explain $?
# (samples of 30 ms: a PVH guest's CPUID exits are ~0.1-0.2 ms each under TCG, thousands a sample;
# the PVH guest alone on its pCPU: with a PV guest beside it there, it went away in its CPUID samples)
echo "xen rig: vmtax compare xen:type=pvh local --bench $CPUID_BENCH $ARGS --min-time-ms 30 --max-time 2m"
# shellcheck disable=SC2086
$vmtax compare xen:type=pvh local --bench $CPUID_BENCH $ARGS --min-time-ms 30 --max-time 2m --pairing blocks --explain --json "$out/compare-cpuid.json"
step compare-cpuid $?
$vmtax explain --json "$out/explain-cpuid.json" >/dev/null
step explain-cpuid $?
echo "xen rig: lockstep pairs over the PV console (compare's default pairing): vmtax compare local xen:type=pv --bench getppid cpuid --max-time 2m"
$vmtax compare local xen:type=pv --bench getppid cpuid --max-time 2m --explain --json "$out/compare-lockstep.json"
step lockstep $?
$vmtax explain --json "$out/explain-lockstep.json" >/dev/null
step explain-lockstep $?
echo "xen rig: each round on a fresh boot of the PV domU: vmtax compare local xen:type=pv --bench getppid --max-time 2m --reboot"
$vmtax compare local xen:type=pv --bench getppid --max-time 2m --reboot --json "$out/compare-reboot.json"
step reboot $?
cp "$VMTAX_DB" "$out/xen.db" 2>/dev/null
echo "xen rig: the Xen-only tests (pytest -m xen): no domain left after Ctrl-C or a killed controller"
.venv/bin/pytest -q -m xen -p no:cacheprovider --junitxml="$out/xen-tests.xml" tests/test_xen_live.py
step tests $?
xl list >"$out/xl-list.txt" 2>&1
