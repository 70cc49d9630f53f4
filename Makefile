# The two commands a newcomer needs:
#   make demo   set up, then run the main job
#   make test   set up, then run every test
PY      ?= python3
VENV    := .venv
VMTAX   := $(VENV)/bin/vmtax

.PHONY: setup system agent demo test test-fast clean

setup: system agent $(VENV)/.installed

system:
	@scripts/setup-system.sh

agent:
	@$(MAKE) -s -C agent all build/vmtax-agent-san build/test_harness

$(VENV)/.installed: pyproject.toml
	@test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	@$(VENV)/bin/pip install -q --upgrade pip
	@$(VENV)/bin/pip install -q -e '.[test]'
	@touch $@

demo: setup
	$(VMTAX) compare local qemu uml container --skip-unavailable --max-time 5m

test: setup
	$(MAKE) -C agent test
	$(VENV)/bin/pytest -q

test-fast: setup
	$(VENV)/bin/pytest -q -m "not e2e"

clean:
	$(MAKE) -C agent clean
	rm -rf $(VENV)
