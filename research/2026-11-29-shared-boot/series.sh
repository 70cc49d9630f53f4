#!/bin/sh
# A series of two-sided gates of TCG guests under compare --shared-boot, as a
# CI job of two QEMU builds would run them: each pair of runs is an A/A run
# (qemu against qemu:label=aa) and an injected one (qemu against
# qemu:inject=2,label=slow), 10 minutes each, gated at 1%.
# Usage: series.sh OUTDIR PAIRS [extra compare options]
out=$1 pairs=$2; shift 2
mkdir -p "$out"
vmtax=${VMTAX:-$(dirname "$0")/../../.venv/bin/vmtax}
rows="getppid page_fault null_read stat sig_handle pi segv fork_exec"
i=1
while [ "$i" -le "$pairs" ]; do
  for side in qemu:label=aa qemu:inject=2,label=slow; do
    tag=$(echo "$side" | sed 's/.*label=//')
    echo "== $i $tag $(date -u +%H:%M:%S)"
    # shellcheck disable=SC2086  # rows is a word list
    "$vmtax" --db "$out/series.db" compare qemu "$side" --bench $rows --max-time 10m --median --shared-boot \
      --gate 1% --json "$out/$tag-$i.json" "$@" >"$out/$tag-$i.txt" 2>&1
    echo "exit $?"
  done
  i=$((i + 1))
done
echo "== done $(date -u +%H:%M:%S)"
