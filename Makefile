# The two commands: `make demo` and `make test`. Both work from a fresh clone with nothing but python3.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Python writes its bytecode caches here even where the environment says not to (some images set
# PYTHONDONTWRITEBYTECODE): otherwise every process `make test` starts (each CLI call, simulator and probe, each
# pytest worker, whose assertion rewriting is cached the same way) compiles specdash and the tests from source
# again. On a clean clone no `__pycache__` was ever written, and importing what `specdash up` imports took
# 0.76-0.94 CPU-s against 0.57-0.67 CPU-s with the caches. They live in `__pycache__/`, which git ignores.
unexport PYTHONDONTWRITEBYTECODE

# apt-get needs root; use sudo when we are not root.
SUDO  := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test check install system-deps test-engine clean newest newest-venv

$(STAMP): pyproject.toml requirements.lock
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade 'pip>=25.1'
	$(PY) -m pip install -q -c requirements.lock -e . --group dev
	touch $(STAMP)

install: $(STAMP)

# What the tests need from the OS: the OpenSSH server (tests run a real sshd on loopback),
# tmux (end-to-end tests drive the app in it), iproute2 (network-namespace tests), chromium (the HTML
# report is checked in a real headless browser) and Slurm 22.05 with munge (tests/support/slurm.py starts a
# controller and two slurmd of its own; the packages' system services are not used).
system-deps:
	@missing=""; \
	[ -x /usr/sbin/sshd ] || missing="$$missing openssh-server"; \
	command -v tmux >/dev/null || missing="$$missing tmux"; \
	command -v ip >/dev/null || missing="$$missing iproute2"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	[ -x /usr/sbin/slurmctld ] || missing="$$missing slurmctld"; \
	[ -x /usr/sbin/slurmd ] || missing="$$missing slurmd"; \
	command -v sbatch >/dev/null || missing="$$missing slurm-client"; \
	[ -x /usr/sbin/munged ] || missing="$$missing munge"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

check: install
	$(VENV)/bin/ruff format --check specdash tests benchmarks
	$(VENV)/bin/ruff check specdash tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

# specdash as a plain `pip install` gets it: the newest versions pyproject's ranges allow (not the lock file),
# in a venv of its own; every command must print nothing on stderr (tests/install/newest.py). Reused between
# runs, so only what moved on the index is downloaded.
NEWEST := .venv-newest
newest: install newest-venv
	$(PY) tests/install/newest.py $(NEWEST)

newest-venv:
	[ -x $(NEWEST)/bin/python ] || python3 -m venv $(NEWEST)
	$(NEWEST)/bin/python -m pip install -q --upgrade --upgrade-strategy eager .

# Workers for `make test` (pytest-xdist): six on the 2-core machine the suite is kept green on, idle and under a CPU
# hog on each core. Most tests wait on real processes, sockets and simulated time, so more workers than cores fill
# the waits. While the suite was CPU-bound, six gained nothing over four and eight busy processes (six workers, two
# hogs) broke tests that hold a timing bound (ci29-ci31). Once the UI tests stopped rebuilding the footer for
# nothing (a quarter of their CPU) and every process stopped compiling specdash again (no bytecode caches had been
# written), four workers left 22 % of the CPU idle (ci36): six took the workers' part from 11 min 53 s to 9 min 02 s
# (ci36, ci38) and passed under two CPU hogs (ci39). `make test TEST_WORKERS=4` runs four. Each worker has its own
# sshd, namespaces, port block and temp dirs. A test file stays on one worker (`loadfile`): module fixtures that run
# every CLI case once are not run twice; files go slowest first (tests/durations.json, tests/support/durations.py).
# `make test TEST_WORKERS=0` runs in one process. The 25 slowest tests are listed.
# A test that loads every core itself or holds a timing bound is marked `exclusive_cpu` and needs the machine
# alone: those run after the workers, in one process. Among the workers (tests/support/cpu_lock.py) each one first
# waited for every test in flight to end, with the other workers held back meanwhile: 546 worker-seconds in ci20.
# What comes before the tests runs two at a time (make -j2): the two venvs' pip installs side by side, then `check`
# (mostly mypy, on one core) beside `newest`: 100 s one after the other on a fresh clone, 59 s so.
TEST_WORKERS ?= 6
PYTEST := env -u NO_COLOR -u TEXTUAL $(PY) -m pytest -q

test:
	$(MAKE) --no-print-directory -j2 --output-sync=target system-deps check newest
	$(PYTEST) -m "not engine and not exclusive_cpu" -n $(TEST_WORKERS) --dist loadfile --durations=25
	$(PYTEST) -m "exclusive_cpu and not engine" -n 0 --durations=5

# The real-engine tests: installs the vLLM CPU build and builds a local random-weight model into .engine/
# (about 2 min and 3.5 GB the first time; reused afterwards), then runs the tests marked `engine` against it
# over a real loopback sshd (about 5 min). Not part of `make test`. Figures: .engine/results/summary.md.
test-engine: install system-deps
	tests/engine/install_engine.sh .engine
	env -u NO_COLOR -u TEXTUAL $(PY) -m pytest -q -m engine tests/engine -s
	@cat .engine/results/summary.md

# The one-minute tour (baseline, sweep, EAGLE-3, sweep, crossover); any key hands over the keyboard.
demo: install
	$(VENV)/bin/specdash demo --autoplay

clean:
	rm -rf $(VENV) $(NEWEST) dist build .pytest_cache .mypy_cache .ruff_cache
