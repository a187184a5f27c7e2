# ExtraRLHF — every target sets up what it needs itself (virtual env included).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

TOOLS := .tools
NPM_TOOLS := @modelcontextprotocol/inspector @anthropic-ai/claude-code @openai/codex opencode-ai axe-core
TOOLS_STAMP := $(TOOLS)/.installed

.PHONY: run test bench setup clean golden mcp play tools ui chromium postgres prod-demo improve docs sanitize FORCE
FORCE:

# The virtual env (below), then the network shipped with the project registered in checkpoints/ as
# `champion` (every time, a no-op when it is there; a model of your own named champion is left alone).
setup: $(STAMP)
	@$(PY) -m extrarlhf champion ensure

# The native engine core (native/, DESIGN 16): a change to its sources rebuilds it.
NATIVE_SOURCES := native/pyproject.toml native/CMakeLists.txt CMakeLists.txt buildsys/extrarlhf_build.py $(wildcard native/src/*.cc native/src/*.h native/engine_native/*.py)

# (Re)create the virtual env when it is missing or pyproject.toml (or native/) changed. The native
# core is built after the main install; if it cannot be (no compiler, no network), one line says
# so, a stale build is removed and the Python engine is used. The editable install leaves the core
# out (a regular `pip install .` compiles it; buildsys/extrarlhf_build.py says why), so it is
# built once, here, as native/'s own distribution.
$(STAMP): pyproject.toml $(NATIVE_SOURCES)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "ExtraRLHF needs Python >= 3.11; set PYTHON=/path/to/python3.11+")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[pipeline,mcp,arena,production,train,rl,sb3,minari,test,deploy,k8s,docker,dg,docs]'
	@if $(PY) -m pip install --quiet ./native >$(VENV)/native-build.log 2>&1; then \
		echo "native engine core built (engine_native)"; \
	else $(PY) -m pip uninstall --quiet --yes extraarena-engine-native >/dev/null 2>&1; \
		echo "native engine core not built (pip install ./native failed, see $(VENV)/native-build.log): the Python engine is used"; fi
	@touch $(STAMP)

# The main job end to end through Dagster on a persistent local home (.dagster_home, SQLite).
run: $(STAMP)
	$(PY) -m extrarlhf_assets.run_main

# The Dagster UI on the same home.
ui: $(STAMP)
	@mkdir -p .dagster_home
	@test -f .dagster_home/dagster.yaml || printf 'telemetry:\n  enabled: false\nnux:\n  enabled: false\n' > .dagster_home/dagster.yaml
	DAGSTER_HOME=$(CURDIR)/.dagster_home $(VENV)/bin/dagster dev -w workspace.yaml

# Headless Chromium for the UI screenshot test, from the system packages when missing.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-headless-shell >/dev/null 2>&1 || \
	  (command -v apt-get >/dev/null 2>&1 && \
	   (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 || \
	    (apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1))) || \
	  echo "warning: could not install chromium; the UI screenshot test will be skipped"

# PostgreSQL server binaries for the production-plane tests (throwaway clusters), from the
# system packages when neither PATH nor /usr/lib/postgresql/*/bin has initdb.
postgres:
	@command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
	  (command -v apt-get >/dev/null 2>&1 && \
	   (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null 2>&1 || \
	    (apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null 2>&1))) || \
	  echo "warning: could not install postgresql; the production-plane tests will be skipped"

# Third-party test clients, one npm install into the ignored .tools/: the MCP Inspector CLI, the
# real MCP clients (Claude Code, Codex, OpenCode) the tests drive and axe-core (the arena's
# accessibility check); without npm or the registry, one warning line and their tests skip. A
# package added to NPM_TOOLS since the last install is installed (the stamp is redone).
tools: $(TOOLS_STAMP)

$(TOOLS_STAMP): $(if $(strip $(foreach p,$(NPM_TOOLS),$(if $(wildcard $(TOOLS)/node_modules/$(p)/package.json),,$(p)))),FORCE)
	@if command -v npm >/dev/null 2>&1; then \
		{ npm install --silent --no-audit --no-fund --prefix $(TOOLS) $(NPM_TOOLS) && touch $@; } \
		|| echo "warning: could not install $(NPM_TOOLS) from npm; their tests will be skipped"; \
	else echo "warning: npm not found; the MCP Inspector and real-client tests will be skipped"; fi

# The whole suite (native core in use where built), then the tests of what the backend switches
# (engine, baselines, search, envs, the matches and series that play them) again on the Python
# engine, the reference path (~1.5 min: the process-lifetime, session and training tests do not
# depend on the backend and are not repeated), then the native tests under the sanitizers.
PYTHON_BACKEND_TESTS := tests/engine tests/envs tests/adapters/test_baselines.py tests/adapters/test_search.py \
	tests/runtime/test_match.py tests/runtime/test_series.py tests/runtime/test_live.py tests/runtime/test_work_bounds.py

test: $(STAMP) tools chromium postgres
	RLHF_REQUIRE_POSTGRES=1 RLHF_REQUIRE_NATIVE=1 $(PY) -m pytest -q
	EXTRAARENA_ENGINE=python RLHF_REQUIRE_NATIVE=1 $(PY) -m pytest -q $(PYTHON_BACKEND_TESTS) \
		--ignore-glob='tests/engine/test_native_*' -k 'not sigkill and not maskable_ppo_quickstart'
	@$(MAKE) --no-print-directory sanitize

# The native tests (tests/engine/test_native_*.py) on engine_native built with AddressSanitizer +
# UBSan (ENGINE_NATIVE_SANITIZE, native/CMakeLists.txt) into build/native-asan/ (pip --target: the
# venv's build is untouched; the build backend comes from PyPI like make setup's). The interpreter
# is not instrumented, so libasan (and libstdc++, which ASan must see before the module throws)
# is preloaded; PYTHONMALLOC=malloc puts Python's objects on malloc so ASan sees reads past a
# list's items; detect_leaks=0 because CPython frees little at exit by design; --capture=sys
# leaves fd 2 to the reports (with fd capture an abort would print nothing).
ASAN_DIR := build/native-asan
ASAN_ENV = PYTHONPATH=$(CURDIR)/$(ASAN_DIR)/site PYTHONMALLOC=malloc \
	LD_PRELOAD="$$(g++ -print-file-name=libasan.so) $$(g++ -print-file-name=libstdc++.so)" \
	ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
sanitize: $(STAMP)
	CMAKE_BUILD_PARALLEL_LEVEL=2 $(PY) -m pip install --quiet --no-deps --upgrade --target $(ASAN_DIR)/site \
		-C cmake.define.ENGINE_NATIVE_SANITIZE=ON -C build-dir=$(CURDIR)/$(ASAN_DIR)/build ./native
	@ldd $(ASAN_DIR)/site/engine_native/_core*.so | grep -q libasan || { echo "make sanitize: $(ASAN_DIR)'s engine_native is not linked with ASan"; exit 1; }
	@$(ASAN_ENV) $(PY) -c 'import engine_native as m, sys; sys.exit(None if "/$(ASAN_DIR)/" in m.__file__ else f"make sanitize: imported {m.__file__}, not $(ASAN_DIR)")'
	$(ASAN_ENV) RLHF_REQUIRE_NATIVE=1 $(PY) -m pytest -q --capture=sys $(wildcard tests/engine/test_native_*.py)

# The production plane on a throwaway local PostgreSQL: fixture, export with the gate open, where it went.
prod-demo: $(STAMP) postgres
	$(PY) -m extrarlhf.production.demo

mcp: $(STAMP)
	$(PY) -m mcp_server

# The browser arena on http://127.0.0.1:8765/ (docs/playing.md "In the browser"); ARENA_ARGS adds
# options, e.g. ARENA_ARGS='--host 0.0.0.0 --token ...' to expose it.
play: $(STAMP)
	$(PY) -m extrarlhf arena $(ARENA_ARGS)

# Expert iteration from nothing for 60 minutes (at least the last 15 in a policy-gradient fine-tune of six
# learners, the first imitation round that would not fit whole leaving the rest to it; the students
# read the observation through the sets encoder), then
# the promoted network alone against greedy
# over 2,000 pairs (JSON on stdout); the run's datasets and checkpoints are kept in
# improve-runs/<UTC time>/; its raw traces (stored compact, ~25 KB a battle) are deleted at the end once
# the last dataset version, which holds them all, validates (add --keep-traces to keep them; docs/data-format.md 1.2).
improve: $(STAMP)
	$(PY) -m benchmarks.improve --loop --minutes 60 --first-battles 1000 --round-battles 4000 --growth 2.5 --encoder sets \
		--finetune-minutes 15 --finetune-round-minutes 45 --ft-learners 6 --workdir improve-runs/$$(date -u +%Y%m%dT%H%M%SZ)

bench: $(STAMP)
	@for script in $$(ls benchmarks/*.py | grep -v '/_'); do \
		name=$$(basename $$script .py); echo "== benchmarks.$$name"; $(PY) -m benchmarks.$$name || exit 1; done

# The documentation site (docs/ + mkdocs.yml) into the ignored site/; strict: a broken link or
# anchor, or a page missing from the nav, fails the build. Open site/index.html.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

# Deliberately regenerate the golden playthroughs after an intended rule change.
golden: $(STAMP)
	$(PY) -m tests.golden regenerate

clean:
	rm -rf $(VENV) $(TOOLS) .pytest_cache .hypothesis build site *.egg-info
