#!/bin/sh
# An A/B of two guest kernels, gated as CI would gate it (docs/change.md):
# Debian's cloud kernel (the baseline build) against its generic one, both
# under TCG, five rows, three minutes; the scoreboard and the gate's verdicts
# go to results/ab-kernels.txt.  Exit status: the gate's (0 pass, 1 regressed,
# 3 inconclusive).  Needs both kernels under /boot (make setup installs them).
set -eu
cd "$(dirname "$0")/.."
A=${KERNEL_A:-/boot/vmlinuz-6.1.0-56-cloud-amd64}
B=${KERNEL_B:-/boot/vmlinuz-6.1.0-56-amd64}
for k in "$A" "$B"; do
    [ -r "$k" ] || { echo "gate_kernels: no kernel $k (set KERNEL_A and KERNEL_B)" >&2; exit 2; }
done
rc=0
.venv/bin/vmtax compare "qemu:accel=tcg,kernel=$A" "qemu:accel=tcg,kernel=$B" \
    --bench getppid page_fault fork_exec ctx_2p_16k pi --max-time 3m --gate 2% \
    > results/ab-kernels.txt || rc=$?
cat results/ab-kernels.txt
exit $rc
