# One entry point for every chore; `make test` is what CI runs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
BUF := node_modules/.bin/buf
SITE = $(shell $(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
PROTOS := $(wildcard proto/gateway/v1/*.proto)

# Bytecode is written, whatever the environment says: the suite's workers and the gateways
# its tests start would otherwise each compile the same modules again (pytest's rewritten
# test modules alone cost 15 s of every worker's collection).
unexport PYTHONDONTWRITEBYTECODE

# The exact versions (with their hashes) of the runtime and `dev` dependencies that CI
# installs and tests; `make lock` writes it from pyproject.toml.
LOCK := requirements-dev.lock
# The runtime dependencies alone, at the versions of $(LOCK): what the image installs.
RUNTIME_LOCK := requirements.lock
# The lock's resolver, pinned so every machine writes the same lock; only `make lock` needs it.
UV_VERSION := 0.13.9
# Extra flags for `make lock`, e.g. LOCK_FLAGS=--upgrade, or LOCK_FLAGS='--upgrade-package ruff'.
LOCK_FLAGS ?=

.PHONY: image deploy-check setup lock hooks run generate check-generated third_party breaking lint typecheck test bench mutate clean claude-code gemini-cli js-clients codex-cli opencode portkey

# The venv gets what the lock pins, hash-checked, and nothing newer; then the project itself,
# without resolving again. `pip check` fails when a runtime dependency added to pyproject.toml
# is missing from a stale lock (a dev one is not seen there): run `make lock`.
$(BIN)/gateway: pyproject.toml $(LOCK)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --require-hashes -r $(LOCK)
	$(BIN)/pip install --quiet --no-deps -e .
	$(BIN)/pip check
	touch $@

$(BUF): package.json
	npm install --silent --no-audit --no-fund
	touch $@

setup: $(BIN)/gateway $(BUF)

# Resolves pyproject.toml's dependencies and the `dev` extra with uv, one version each, kept
# from the current lock unless LOCK_FLAGS asks for upgrades; then the runtime lock from it. Universal: markers such as
# uvloop's `sys_platform != 'win32'` stay in the lock, and Python 3.11 is the floor.
lock:
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet uv==$(UV_VERSION)
	$(BIN)/uv pip compile pyproject.toml --extra dev --universal --python-version 3.11 \
		--generate-hashes --custom-compile-command 'make lock' --quiet $(LOCK_FLAGS) \
		--output-file $(LOCK)
	$(BIN)/uv pip compile pyproject.toml --universal --python-version 3.11 \
		--generate-hashes --custom-compile-command 'make lock' --quiet -c $(LOCK) \
		--output-file $(RUNTIME_LOCK)

# The git hook that runs .pre-commit-config.yaml (ruff, buf format, generated code) on commit.
# Git keeps hooks per repository, so in a `git worktree` it runs for every worktree, each
# with its own .venv and node_modules (`make setup` there first).
# The Claude Code CLI (an npm package with a native binary, about 250 MB), for the test that
# drives it through the gateway (tests/clients/test_claude_code.py); optional, not in setup.
CLAUDE_CODE_VERSION := 2.1.197
claude-code:
	npm install --silent --no-audit --no-fund --no-save --prefix build/claude-code \
		@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION)

# Gemini CLI, for the test that drives it through the gateway (tests/clients/
# test_gemini_cli.py); optional, not in setup.
GEMINI_CLI_VERSION := 0.61.0
gemini-cli:
	npm install --silent --no-audit --no-fund --no-save --prefix build/gemini-cli \
		@google/gemini-cli@$(GEMINI_CLI_VERSION)

# Codex CLI (about 400 MB with its native binary), for the test that drives it through
# the gateway (tests/clients/test_codex_cli.py); optional, not in setup.
CODEX_CLI_VERSION := 0.171.0
codex-cli:
	npm install --silent --no-audit --no-fund --no-save --prefix build/codex-cli \
		@openai/codex@$(CODEX_CLI_VERSION)

# opencode (about 350 MB with its native binary), for the test that drives it through
# the gateway (tests/clients/test_opencode.py); optional, not in setup.
OPENCODE_VERSION := 1.18.33
opencode:
	npm install --silent --no-audit --no-fund --no-save --prefix build/opencode \
		opencode-ai@$(OPENCODE_VERSION)

# Portkey's open-source gateway (Node), the second peer bench.load measures beside
# LiteLLM; bench.load installs the same on first use. Optional, not in setup.
PORTKEY_VERSION := 1.15.2
portkey:
	npm install --silent --no-audit --no-fund --no-save --prefix build/portkey \
		@portkey-ai/gateway@$(PORTKEY_VERSION)

# The JavaScript SDKs the client tests drive (tests/clients/test_js_clients.py), at the
# versions tests/js/package-lock.json pins; optional, not in setup.
js-clients:
	npm ci --silent --no-audit --no-fund --prefix tests/js

hooks: setup
	$(BIN)/pre-commit install

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
	$(BIN)/ruff check server http_facade tests tools bench deploy
	$(BIN)/ruff format --check server http_facade tests tools bench deploy

typecheck: $(BIN)/gateway
	$(BIN)/mypy

# Test processes (pytest-xdist): more than cores, since most tests wait on loopback
# servers, subprocesses and timers; each has its own ports, database and Redis prefix.
TEST_WORKERS ?= 4
test: setup lint check-generated typecheck
	$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal

# The image (Containerfile), built here without a registry: its base is made from Debian's
# packages (mmdebstrap, then imported), and the build reaches PyPI with this machine's CAs.
IMAGE ?= localhost/gateway:dev
IMAGE_BASE := localhost/gateway-base:bookworm
DEBIAN_MIRROR ?= http://deb.debian.org/debian
PODMAN := podman --runtime runc
image:
	podman image exists $(IMAGE_BASE) || mmdebstrap --quiet --variant=minbase \
		--include=python3.11,python3.11-venv,binutils,ca-certificates bookworm - \
		$(DEBIAN_MIRROR) | podman import - $(IMAGE_BASE)
	$(PODMAN) build --format docker --network host --build-arg BASE=$(IMAGE_BASE) \
		--volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/build-ca.crt:ro \
		--build-arg PIP_CERT=/etc/ssl/build-ca.crt -t $(IMAGE) .

# The deployment checks (after `make image`): the chart rendered and validated, the image
# run, three replicas behind haproxy on a Redis Cluster and pgbouncer; figures printed.
deploy-check: $(BIN)/gateway
	$(BIN)/pytest -s -p no:randomly deploy/checks

bench: $(BIN)/gateway
	$(BIN)/python -m bench.overhead

# Mutation testing ([tool.mutmut] in pyproject.toml) of the modules where a bug costs
# money or availability; not part of `make test` or CI. MUTANTS narrows it to some
# mutants by name, e.g. make mutate MUTANTS='server.application.pipeline.breaker*'.
# It runs in a copy of the checkout's files as they are now (what .gitignore names
# aside) in $(MUTATION_TREE), with the checkout's interpreter given by its absolute path,
# so the checkout stays usable meanwhile and nothing depends on where its .venv is.
# mutmut records each mutant's result in $(MUTATION_TREE)/mutants/ as it finishes: a
# run stopped (Ctrl-C, a kill) keeps what it tested, still writes the report after a
# Ctrl-C, and the next run goes on from there. A mutant is tested again when its
# function changes; RETEST=1 tests the survivors among MUTANTS again, explained ones
# aside, after new tests, which it first maps to the functions they reach. The report
# of kill rates and surviving mutants goes to build/mutation/report.md (again, without
# a run: $(BIN)/python -m tools.mutation_report).
MUTANTS ?=
RETEST ?=
# Children in parallel: the selected tests mostly wait on loopback servers and timers,
# so more children than cores keep the cores busy.
MUTATION_CHILDREN ?= 6
MUTATION_TREE := build/mutation/tree
mutate: $(BIN)/gateway
	mkdir -p $(MUTATION_TREE)
	rsync -a --delete --exclude=/.git --filter=':- .gitignore' ./ $(MUTATION_TREE)/
	if [ -n "$(RETEST)" ] && [ -d $(MUTATION_TREE)/mutants ]; then \
		$(BIN)/python -m tools.mutation_report --forget-survivors $(MUTANTS); \
		rm -f $(MUTATION_TREE)/mutants/mutmut-stats.json; fi
	trap : INT; start=$$(date +%s); cd $(MUTATION_TREE); \
	nice $(abspath $(BIN))/mutmut run --max-children $(MUTATION_CHILDREN) $(MUTANTS); \
	status=$$?; cd $(CURDIR); \
	$(BIN)/python -m tools.mutation_report --seconds $$(( $$(date +%s) - start )) \
		--output build/mutation/report.md; \
	exit $$status

clean:
	rm -rf $(VENV) build node_modules mutants
