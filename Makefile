# Threadwise: the two commands of the README.
#   make run                 set up (first time) and start the bot: Slack/Discord with tokens, else console chat
#   make ask Q="question"    set up (first time) and answer one question
#   make test                set up (first time), lint (ruff, mypy) and run the tests (20-40 min on 2 cores)
#   make test TESTS=tests/test_x.py   those tests only, no lint
#   make run HOSTED=1        hosted models only (MISTRAL_API_KEY): wheels only, no compiler, no PyTorch or llama.cpp
#   make test-containers     build the image and run it and compose.yaml with podman (tests/test_container.py)
#   make bench               load benchmark, reindex/search timings, py-spy profile -> bench/README.md
PY ?= python3
TORCH_PIP_ARGS ?=
# the question of `make ask`, passed through the environment so the shell never expands it
export Q
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# HOSTED=1 (run, ask, console): the lean install for hosted models, `pip install threadwise[postgres,metrics]`
HOSTED ?=
ifeq ($(HOSTED),1)
STAMP := $(VENV)/.installed-hosted
endif

.PHONY: run ask console lint test test-containers eval bench bench-profile bench-embeddings clean rebuild-offline

# Hosted models only: every dependency a wheel (nothing compiled), no PyTorch, no llama.cpp.
$(VENV)/.installed-hosted: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install --only-binary=:all: -e ".[postgres,metrics]"
	touch $@

$(VENV)/.installed: pyproject.toml scripts/build-llama-portable.sh
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	# CPU build of torch first: a plain `torch` requirement would pull a multi-GB CUDA build.
	# Elsewhere than our CI machines: make run TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu"
	$(BIN)/pip install "torch==2.13.0" $(TORCH_PIP_ARGS)
	# llama.cpp built for any x86-64-v3 CPU (AVX2/FMA/F16C, no AVX-512/AMX), cached by version
	# and flags: a native build dies with SIGILL on other CPUs (scripts/build-llama-portable.sh)
	$(BIN)/pip install "$$(scripts/build-llama-portable.sh $(BIN)/python)"
	$(BIN)/pip install -e ".[offline,postgres,metrics,documents,test]"
	$(BIN)/python scripts/check_isa.py $(VENV)/lib/python*/site-packages/llama_cpp
	touch $@

# Rebuild the offline backend portably into an existing .venv (after a SIGILL self-check).
rebuild-offline:
	$(BIN)/pip install --force-reinstall --no-deps "$$(scripts/build-llama-portable.sh $(BIN)/python)"
	$(BIN)/python scripts/check_isa.py $(VENV)/lib/python*/site-packages/llama_cpp

run: $(STAMP)
	$(BIN)/threadwise run

# without a question: the usage line, not a 15-minute install first
ask: $(if $(strip $(Q)),$(STAMP))
	@test -n "$$Q" || { echo 'usage: make ask Q="your question"' >&2; exit 2; }
	$(BIN)/threadwise ask -- "$$Q"

console: $(STAMP)
	$(BIN)/threadwise console

# ruff (lint and format) over the whole tree, mypy over bot/ and graphs/ (configured in pyproject.toml)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# the container tests build images: `make test-containers` (.ci/run runs both)
# TESTS="tests/test_x.py tests/test_y.py::test_z": those tests only, without the lint
TESTS ?=
test: $(STAMP) $(if $(TESTS),,lint)
	$(BIN)/python -m pytest -q -m "not container" $(TESTS)

test-containers: $(STAMP)
	$(BIN)/python -m pytest -q -m container tests/test_container.py

eval: $(STAMP)
	$(BIN)/threadwise eval ../shared/eval/dev.jsonl --source ../shared/corpus/langgraph-docs --json bench/results/eval-dev.json

# Benchmarks (bench/README.md): the real `threadwise run` in Slack HTTP mode under 1/50/200
# questions at once against local fakes, keyword reindex and search, and a py-spy profile of a
# burst of 100; each writes bench/results/load-<product commit>.json, bench_report.py the tables;
# bench_floor.py first: the CPU the libraries alone need per question on this machine.
# BENCH_ARGS go to bench/bench_load.py, e.g. BENCH_ARGS="--repeats 1 --sizes 1,50".
BENCH_ARGS ?=
bench: $(STAMP)
	$(BIN)/python bench/bench_floor.py
	$(BIN)/python bench/bench_load.py $(BENCH_ARGS)
	$(BIN)/python bench/bench_kb.py
	$(MAKE) --no-print-directory bench-profile
	$(BIN)/python bench/bench_report.py

bench-profile: $(STAMP)
	test -x $(BIN)/py-spy || $(BIN)/pip install py-spy
	$(BIN)/python bench/bench_profile.py
	$(BIN)/python bench/bench_report.py

# Reindex with local MiniLM embeddings (full takes minutes on two cores) and hybrid search latency.
bench-embeddings: $(STAMP)
	$(BIN)/python bench/bench_kb.py --embeddings
	$(BIN)/python bench/bench_report.py

clean:
	rm -rf $(VENV) data
