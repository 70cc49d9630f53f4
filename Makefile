# The two commands a newcomer needs (README.md):
#   make demo   set up, then run the main job (7 minutes)
#   make test   set up, then run the tests CI runs (the C agent's, unit and end-to-end)
# The rest: docs/development.md.
PY      ?= python3
VENV    := .venv
VMTAX   := $(VENV)/bin/vmtax
PYTEST  := $(VENV)/bin/pytest -q

.PHONY: setup system agent demo demo-all test test-fast test-kvm test-xen validity lint readme clean

setup: system agent $(VENV)/.installed

system:
	@scripts/setup-system.sh

agent:
	@$(MAKE) -s -C agent all build/vmtax-agent-san build/test_harness

$(VENV)/.installed: pyproject.toml
	@test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	@$(VENV)/bin/pip install -q --upgrade pip
	@$(VENV)/bin/pip install -q -e '.[test,serve]'
	@touch $@

# The main job: the machine against a QEMU guest, User-mode Linux, a
# container (runc) and a gVisor sandbox (runsc: left out, saying why, where
# it cannot run), on 13 rows that cover every family and one real workload
# (sysbench cpu, 2-second runs), in a 7-minute budget.  --same-mode: a row
# whose processes fall in two modes reports its ratio over the blocks both
# sides ran in one mode (docs/method.md).  What it reaches on a quiet and on
# a noisy host: docs/method.md, "Precision, measured".
DEMO_BENCH := getppid segv forkwait page_fault null_read stat sig_handle fork_exec \
              ctx_2p_16k mmap pi cpuid tlb_4k sysbench_cpu

demo: setup
	$(VMTAX) compare local qemu uml container container:runtime=runsc --skip-unavailable --max-time 7m \
	  --tool-seconds 2 --same-mode --bench $(DEMO_BENCH)

# All 31 microbenchmark rows in the same budget (wider intervals).
demo-all: setup
	$(VMTAX) compare local qemu uml container --skip-unavailable --max-time 7m --same-mode

# CI (.ci/run): the linters (make lint), the agent's tests, then every Python
# test but the long statistical simulations and the tests that need a real KVM
# (make test-kvm): the end-to-end tests one after another on one pytest-xdist
# worker, the unit tests on the other (tests/conftest.py).
test: setup lint
	$(MAKE) -C agent test
	$(PYTEST) -m "not sim and not kvm and not xen" -n 2 --dist loadgroup --durations=25

# The unit tests alone: no real target, seconds to a few minutes.
test-fast: setup
	$(PYTEST) -m unit

# The long statistical simulations (A/A error rates through the whole runner).
validity: setup
	$(PYTEST) -m sim --durations=10

# ruff (lint and format) and mypy, configured in pyproject.toml; fails on any
# finding.  Needs only the venv (the test extra holds both).  ruff format
# src tests tools examples scripts fixes the layout.  STRICT: the parts mypy
# also checks --strict (every name typed, no Any returned; the modules they
# import are checked as the rest of src/ is, not strictly).
LINTED := src tests tools examples scripts
STRICT := src/vmtax/engine src/vmtax/stats src/vmtax/model.py
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict --follow-imports=silent $(STRICT)

# The README's example scoreboard, from a fresh run of the demo
# (tools/readme_scoreboard.py; RUN=ID takes a stored run instead).
readme: setup
	$(VENV)/bin/python tools/readme_scoreboard.py $(if $(RUN),--run $(RUN),--demo)

# The KVM path for real where the host has no KVM that runs a standard guest:
# a TCG guest with an emulated AMD-V loads kvm-amd and runs vmtax's compare of
# itself against qemu:accel=kvm, its explain and the KVM-only tests (pytest -m
# kvm); VM exits per op are checked (docs/kvm.md). Not part of `test`.
# KVM_RIG="--keep DIR" keeps its results (scripts/kvm-rig/rig.py --help).
test-kvm: setup
	$(VENV)/bin/python scripts/kvm-rig/rig.py $(KVM_RIG)

# The Xen path for real on a host without Xen: a TCG guest boots Debian's
# Xen 4.17 (downloaded, not installed) with a PV dom0, where vmtax compares
# PV and PVH domUs with dom0 and explains them (hypercalls per op by type,
# from xentrace); a second boot without Xen measures bare Linux on the same
# emulated machine; the counts are checked (docs/xen.md). Not part of `test`.
# XEN_RIG="--keep DIR" keeps its results (scripts/xen-rig/rig.py --help).
test-xen: setup
	$(VENV)/bin/python scripts/xen-rig/rig.py $(XEN_RIG)

clean:
	$(MAKE) -C agent clean
	rm -rf $(VENV)
