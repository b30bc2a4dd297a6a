# The two commands of the README. Each creates .venv and installs what it needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: study test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# An editable install is not byte-compiled (pip compiles a regular install): compiled here once, so that a
# shell with PYTHONDONTWRITEBYTECODE set (many container images) does not compile poslab at every command.
.stamp-install: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	$(BIN)/python -m compileall -q src/poslab
	touch $@

# The tests also cover the optional extras: Dask executor and torch training.
.stamp-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,train]'
	$(BIN)/python -m compileall -q src/poslab
	touch $@

## study: run the default study (results/compare_encodings/), replacing an earlier result
study: .stamp-install
	$(BIN)/poslab run --overwrite

## test: run the test suite
test: .stamp-test
	$(BIN)/python -m pytest

## bench: poslab vs the n x n recipe and scikit-learn (benchmarks/README.md; a few minutes)
.stamp-bench: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	touch $@

bench: .stamp-bench
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) .stamp-install .stamp-test .stamp-bench
