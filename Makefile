# The two commands of the README. Each creates .venv and installs what it needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: study test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

.stamp-install: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

# The tests also cover the optional extras: Dask executor and torch training.
.stamp-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,train]'
	touch $@

## study: run the default study (results/compare_encodings/), replacing an earlier result
# An editable install is not byte-compiled (pip compiles a regular install): compiled (the changed modules only)
# before each command, so that a shell with PYTHONDONTWRITEBYTECODE set (many container images) does not compile
# poslab's modules again at every run.
study: .stamp-install
	$(BIN)/python -m compileall -q src/poslab
	$(BIN)/poslab run --overwrite

## test: run the test suite
test: .stamp-test
	$(BIN)/python -m compileall -q src/poslab
	$(BIN)/python -m pytest

## bench: poslab vs the n x n recipe and scikit-learn (benchmarks/README.md; a few minutes)
.stamp-bench: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	touch $@

bench: .stamp-bench
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) .stamp-install .stamp-test .stamp-bench
