#!/usr/bin/env bash
# Installs the Debian packages vmtax needs; does nothing when all are there.
set -euo pipefail

pkgs=(
  build-essential file        # the agent: gcc, static glibc, `file` for its test
  python3 python3-venv        # the vmtax package
  linux-perf                  # perf stat and perf bench, for counters and cross-checks
  procps                      # pgrep, for the tests' leftover-process checks
  qemu-system-x86 qemu-utils  # the qemu target (qemu-img: its qcow2 disks)
  e2fsprogs                   # mkfs.ext4 for the guests' scratch disks
  linux-image-cloud-amd64     # a guest kernel for it (/boot/vmlinuz-*)
  linux-image-amd64           # the generic one: the drivers of e1000, rtl8139 and ahci
  busybox-static              # the guest's and container's userland
  user-mode-linux             # the uml target
  podman runc crun            # the container target (unshare+chroot where podman fails); crun: runtime=crun
  slirp4netns                 # its net=slirp4netns (rootless user-mode networking)
  runsc                       # gVisor: the container target's runtime=runsc (a user-space kernel)
  chromium                    # renders the HTML report in its end-to-end test
  sysbench fio dbench stress-ng redis-server redis-tools  # the workloads (suite apps, stress)
  make strace                 # the compile workload: make runs it, strace finds the toolchain's files
  iperf3 sockperf             # the net suite: each tool in the target, its server on the host
  postgresql libpq5           # --db postgresql://: libpq for psycopg; the tests start a throwaway server
  openssh-client iproute2     # the ssh target (the system ssh); its tests: namespaces (ip netns)
  openssh-server              # its tests: real sshd servers, started by the tests (never as a service)
)
here=$(dirname "$0")

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exec "$here/fetch-sources.sh"

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "setup: installing ${missing[*]}"
# vmtax starts the servers it measures itself, and its tests their own sshd:
# keep apt from starting redis or sshd as a system service (policy-rc.d:
# "no service starts"), where nothing already says so
guard=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
  guard=/usr/sbin/policy-rc.d
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$guard" >/dev/null && $sudo chmod 755 "$guard"
  trap '$sudo rm -f "$guard"' EXIT
fi
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
"$here/fetch-sources.sh"
