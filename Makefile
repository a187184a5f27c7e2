# ExtraRLHF — every target sets up what it needs itself (virtual env included).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test bench setup clean golden

setup: $(STAMP)

# (Re)create the virtual env when it is missing or pyproject.toml changed.
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "ExtraRLHF needs Python >= 3.11; set PYTHON=/path/to/python3.11+")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[rl,test]'
	@touch $(STAMP)

run: $(STAMP)
	$(PY) -m extrarlhf demo

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	@for script in $$(ls benchmarks/*.py | grep -v __init__); do \
		name=$$(basename $$script .py); echo "== benchmarks.$$name"; $(PY) -m benchmarks.$$name || exit 1; done

# Deliberately regenerate the golden playthroughs after an intended rule change.
golden: $(STAMP)
	$(PY) -m tests.golden regenerate

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
