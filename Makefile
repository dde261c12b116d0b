# stampgen: the two commands a newcomer needs are `make codegen` and `make test`.
# Both bootstrap a local virtual environment (.venv) on first use.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMPGEN := $(BIN)/stampgen
# torch==2.13.0 is the CPU build that lies on this machine's disk; a bare `torch` pulls a CUDA build.
TORCH_PIN ?= torch==2.13.0

.PHONY: install codegen codegen-check test test-fast lint fmt bench demo clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH_PIN)"
	$(BIN)/python -m pip install -q -e ".[kernels,dev]"
	touch $@

codegen: install
	$(STAMPGEN) generate

codegen-check: install
	$(STAMPGEN) generate --check
	$(STAMPGEN) fmt --check

test: install codegen-check lint
	$(BIN)/python -m pytest -q

test-fast: install
	$(BIN)/python -m pytest -q -m "not slow"

# mypy cannot follow the import hook of the editable install: it reads the `stampgen` namespace through a
# link (stampgen -> this checkout) in a temporary folder, as tests/test_generate_fixtures.py does.
lint: install
	$(BIN)/ruff check codegen kernels tests benchmarks
	$(BIN)/ruff format --check codegen kernels tests benchmarks
	@root=$$(mktemp -d) && trap 'rm -rf "$$root"' EXIT && ln -s "$(CURDIR)" "$$root/stampgen" && \
	  cd "$$root" && echo "mypy -p stampgen.codegen -p stampgen.kernels.runtime" && MYPYPATH="$$root" "$(abspath $(BIN))/mypy" \
	  --config-file "$(CURDIR)/pyproject.toml" --cache-dir "$(CURDIR)/.mypy_cache" -p stampgen.codegen -p stampgen.kernels.runtime

fmt: install
	$(BIN)/ruff format codegen kernels tests benchmarks
	$(STAMPGEN) fmt

bench: install
	$(BIN)/python -m benchmarks.codegen_bench

# The seed's system end to end on tiny models (CPU, < 30 s): stamps, fusion decisions, accept lengths.
# make demo ARGS="--without-hook DeepseekV4ForCausalLMDSpark" shows SGLang #33312.
demo: install
	$(BIN)/python -m stampgen.kernels.runtime.demo $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
