#!/bin/sh
# A/A of two TCG guests under --shared-boot at two lockstep step sizes
for s in 2 0.25; do
  echo "== step $s $(date -u +%H:%M:%S)"
  ${VMTAX:-.venv/bin/vmtax} --db ${DB:-steps.db} compare qemu qemu:label=aa --bench getppid null_read pi sig_handle --max-time 4m --median --shared-boot --step-ms $s --gate 1% 2>&1 | grep -E "^(getppid|null_read|pi|sig_handle) |gate "
done
echo "== done $(date -u +%H:%M:%S)"
