#!/bin/sh
# A/A gates of two TCG guests, 4 min each, alternating a stock tree (a) and one whose guest
# /init writes 0 to /proc/sys/kernel/randomize_va_space after mounting /proc (b); both trees
# are copies of the commit (git archive) with agent/build copied in: /tmp/exp58a, /tmp/exp58b
out=${1:?usage: aslr-pairs.sh OUTDIR}; mkdir -p "$out"
for i in 1 2 3; do
  for x in a b; do
    echo "== $i $x $(date -u +%H:%M:%S)"
    PYTHONPATH=/tmp/exp58$x/src /work/main/.venv/bin/vmtax --db "$out"/$x.db compare qemu qemu:label=aa \
      --bench page_fault getppid stat fork_exec --max-time 4m --median --shared-boot --gate 1% >"$out"/$x-$i.txt 2>&1
    echo "exit $?"
  done
done
echo "== done $(date -u +%H:%M:%S)"
