# MoTS platform: every target installs what it needs first.
# `make test` runs ruff, mypy and pytest; `make demo` runs the main job end to end.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: help install system lint typecheck test test-fast bench bench-solver bench-market bench-round bench-tasks demo clean reproduce reproduce-full bench-training bench-theorem3 bench-integrity soak bench-scale containers trace-paths images deploy-test restore-drill

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[train,services,dev,provision,plots]"
	touch $(STAMP)

install: $(STAMP) ## create .venv and install the package with all extras

system: ## install and start the machine services the tests use (Redis, PostgreSQL, Prometheus, data)
	bash scripts/ensure_system.sh

containers: ## install podman, runc, debootstrap, qemu-user-static and build the local base images
	bash scripts/ensure_containers.sh $(BASE_ARCHES)

images: install containers ## every image for amd64 and the edge for arm64, pushed to a registry by digest (pinned overlay, registries.yaml) and saved as k3s airgap tarballs: out/deploy/
	bash scripts/ensure_containers.sh arm64
	$(PY) -m tests.containers.run --parts images registry airgap

deploy-test: install containers ## the images, the compose round on podman and the other container checks; cleans up: out/deploy/report.json
	bash scripts/ensure_containers.sh arm64
	$(PY) -m tests.containers.run

restore-drill: install containers ## back up a ledger with a round on the compose deployment, destroy PostgreSQL's volume, restore, compare: out/deploy/report.json
	$(PY) -m tests.containers.run --parts restore

lint: install ## ruff: lint rules and formatting
	$(BIN)/ruff check shared services edge tests benchmarks
	$(BIN)/ruff format --check shared services edge tests benchmarks

typecheck: install ## mypy (strict on the economics core)
	$(BIN)/mypy shared/mots services edge

test: install system containers lint typecheck ## ruff, mypy and the whole pytest suite (the compose round on podman included)
	$(BIN)/pytest -m "not deploy" --durations=20

test-fast: install ## pytest without the slow and integration tests
	$(BIN)/pytest -m "not slow and not integration"

bench-solver: install ## optimum solver against exhaustive enumeration, and the largest N solved in 1 s
	$(PY) -m benchmarks.bench_solver

trace-paths: install system ## the files a purchase and a round run, counted from a trace (docs/architecture.md)
	$(PY) -m benchmarks.trace_paths

bench-market: install system ## market API: purchases/s and p99 at 32 concurrent clients, ledger checked after
	$(PY) -m benchmarks.bench_market

bench-round: install system ## a market round on Flower: the platform's own time as a share of the round
	$(PY) -m benchmarks.bench_round

bench-tasks: install system ## one, two and three tasks' rounds at once (issue 36): out/bench/tasks.json
	$(PY) -m benchmarks.bench_tasks

bench-training: install system ## Flower rounds with 20 nodes vs floor and in-process FedAvg; client throughput vs plain PyTorch
	$(PY) -m benchmarks.bench_training

bench-theorem3: install ## Theorem 3 census: paper SWAN vs robust SWAN reaching K* on random markets
	$(PY) -m benchmarks.theorem3_census

bench-integrity: install system ## every attack on a fresh platform (federation: forged nodes, identity theft, bad updates, drop-out): out/bench/integrity.json
	$(PY) -m benchmarks.bench_integrity

soak: install system ## 50 rounds back to back with churn and a fault per round (kills, Redis, PostgreSQL): out/soak/report.json
	$(PY) -m benchmarks.soak

bench-scale: install system ## full market rounds at N = 1,000, 10,000, 100,000 on SQLite and PostgreSQL: out/bench/scale.json
	$(PY) -m benchmarks.bench_scale

bench: bench-solver bench-theorem3 bench-market bench-round bench-training bench-integrity ## every benchmark

.PHONY: dashboards
dashboards: install ## regenerate the Grafana dashboard (both copies) from monitoring/grafana/build_dashboard.py
	$(PY) monitoring/grafana/build_dashboard.py

DATASET := /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz

demo: install system ## the main job: one market cycle on Fashion-MNIST with real Flower training (out/demo)
	$(BIN)/mots demo --out out/demo

reproduce: install ## the paper's evaluation, quick (minutes): PNG figures and out/reproduce/report.md
	test -f $(DATASET) || bash scripts/ensure_system.sh
	$(BIN)/mots reproduce --quick --out out/reproduce

reproduce-full: install ## the paper's evaluation with R = 500/600 and 30 runs (hours): out/reproduce/report.md
	test -f $(DATASET) || bash scripts/ensure_system.sh
	$(BIN)/mots reproduce --full --out out/reproduce

clean: ## remove build outputs (keeps .venv)
	rm -rf out .pytest_cache .mypy_cache .ruff_cache
