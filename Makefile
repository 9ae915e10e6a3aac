# One entry point for every chore; `make test` is what CI runs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
BUF := node_modules/.bin/buf
SITE = $(shell $(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
PROTOS := $(wildcard proto/gateway/v1/*.proto)

.PHONY: setup run generate check-generated third_party breaking lint typecheck test bench clean

$(BIN)/gateway: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

$(BUF): package.json
	npm install --silent --no-audit --no-fund
	touch $@

setup: $(BIN)/gateway $(BUF)

run: $(BIN)/gateway
	$(BIN)/gateway

third_party: $(BIN)/gateway
	rm -rf build/googleapis && mkdir -p build/googleapis/google
	cp -r $(SITE)/google/api $(SITE)/google/rpc build/googleapis/google/
	find build/googleapis -type f ! -name '*.proto' -delete

generate: $(BIN)/gateway
	$(BIN)/python -m tools.generate

check-generated: $(BIN)/gateway
	$(BIN)/python -m tools.generate --check

# Wire and JSON compatibility against the contract on main (its last commit).
breaking: setup third_party
	rm -rf build/against && mkdir -p build/against/build
	git archive main proto buf.yaml | tar -x -C build/against
	cp -r build/googleapis build/against/build/
	cd build/against && ../../$(BUF) build -o ../against.binpb
	$(BUF) breaking proto --against build/against.binpb

lint: setup third_party breaking
	$(BUF) format proto --diff --exit-code
	$(BUF) lint
	$(BIN)/ruff check server http_facade tests tools bench
	$(BIN)/ruff format --check server http_facade tests tools bench

typecheck: $(BIN)/gateway
	$(BIN)/mypy

test: setup lint check-generated typecheck
	$(BIN)/pytest

bench: $(BIN)/gateway
	$(BIN)/python -m bench.overhead

clean:
	rm -rf $(VENV) build node_modules
