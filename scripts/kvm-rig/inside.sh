#!/bin/sh
# What the KVM rig runs inside its outer guest (scripts/kvm-rig/rig.py): the
# host's root filesystem, read-only under a tmpfs, with a real KVM (kvm-amd
# on TCG's emulated AMD-V).  vmtax's own compare of `local` (this outer
# guest) and `qemu:accel=kvm` (a guest under this KVM), its explain,
# then the tests of the KVM-only code paths.  Each step's status goes to
# OUT/status; the rig checks the figures on the host.
# Usage: inside.sh REPO OUT  (OUT/rig.env: BENCH, TARGET, COMPARE_ARGS; the rig copies this file to OUT)
repo=$1 out=$2
step() { echo "$1 $2" >>"$out/status"; }
# a failure before vmtax runs: its cause, one line, for the rig to say (step "cause")
cause() { echo "kvm rig: $*"; step cause "$*"; exit 2; }
cd "$repo" 2>/dev/null || cause "cannot cd to the repository $repo inside the outer guest"
[ -x .venv/bin/vmtax ] || cause "no $repo/.venv/bin/vmtax inside the outer guest"
. "$out/rig.env" || cause "cannot read $out/rig.env"
export PYTHONDONTWRITEBYTECODE=1 VMTAX_DB=/tmp/vmtax-rig.db

# The guest under KVM is the baseline: every target runs the baseline's
# iteration count, and here a CPUID costs ~90 us in it against ~10 ns in this
# TCG guest, whose count would keep the nested guest busy for an hour.
echo "kvm rig: vmtax compare $TARGET local --bench $BENCH $COMPARE_ARGS"
# shellcheck disable=SC2086  # BENCH and COMPARE_ARGS are word lists
.venv/bin/vmtax compare "$TARGET" local --bench $BENCH $COMPARE_ARGS --json "$out/compare.json"
step compare $?
echo
echo "kvm rig: vmtax explain"
.venv/bin/vmtax explain --json "$out/explain.json" >/dev/null && .venv/bin/vmtax explain
step explain $?
cp "$VMTAX_DB" "$out/vmtax.db" 2>/dev/null

echo
echo "kvm rig: the KVM-only tests (pytest -m kvm)"
.venv/bin/pytest -q -m kvm -p no:cacheprovider --junitxml="$out/kvm-tests.xml" tests/test_kvm.py
step tests $?

# --shared-boot under KVM: each round one guest's state live-migrated into both
# (a new QEMU each), the exit counts read from the new QEMUs' probes
echo
echo "kvm rig: vmtax compare $TARGET $TARGET,label=b --bench cpuid $COMPARE_ARGS --shared-boot"
# shellcheck disable=SC2086  # COMPARE_ARGS is a word list
.venv/bin/vmtax compare "$TARGET" "$TARGET,label=b" --bench cpuid $COMPARE_ARGS --shared-boot \
  --json "$out/shared.json"
step shared $?
