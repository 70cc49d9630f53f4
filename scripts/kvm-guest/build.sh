#!/usr/bin/env bash
# A guest kernel for this host's KVM when it is kvm_pvm (see results/kvm.md):
# Debian's linux-source-6.1 with a small config (scripts/kvm-guest/config:
# tinyconfig plus virtio, serial, PVH; no jump labels, kprobes or ftrace,
# which patch code with int3) and the int3 self-test left out (the
# emulator behind this KVM cannot emulate int3 in kernel mode).  Output:
# the ELF vmlinux, booted through its PVH entry (`-kernel vmlinux`).
# Usage: build.sh OUT_DIR   (about 3 minutes on 2 CPUs; does nothing when OUT_DIR/vmlinux is newer than the config)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build.sh OUT_DIR}
mkdir -p "$out"
if [ -f "$out/vmlinux" ] && [ "$out/vmlinux" -nt "$here/config" ] && [ "$out/vmlinux" -nt "$here/build.sh" ]; then
  exit 0
fi
src=/usr/src/linux-source-6.1.tar.xz
[ -f "$src" ] || { echo "kvm guest: $src missing (apt install linux-source-6.1)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/var/tmp}/vmtax-kvm-kernel-XXXXXX")
trap 'rm -rf "$work"' EXIT
tar -xf "$src" -C "$work"
cd "$work"/linux-source-6.1
cp "$here/config" .config
sed -i 's/^\(\s*\)int3_selftest();/\1\/* int3_selftest(); vmtax: not under kvm_pvm *\//' arch/x86/kernel/alternative.c
grep -q 'vmtax: not under kvm_pvm' arch/x86/kernel/alternative.c
make -s olddefconfig
make -s -j"$(nproc)" vmlinux
cp vmlinux "$out/vmlinux.tmp" && mv "$out/vmlinux.tmp" "$out/vmlinux"
cp .config "$out/config"
