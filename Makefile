SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

# Compose reads .env itself; a variable from your shell or this command line wins.
COMPOSE ?= docker compose
# A value from the environment, else from .env (for what make itself prints).
env = $(or $($(1)),$(shell sed -n 's/^$(1)=//p' .env))
TESTID ?= $(shell date +%Y%m%d-%H%M%S)
# Services `make up` starts; empty means all of them.
SERVICES ?=
# Test tools built from source are cached here (scripts/test-deps.sh).
UDS_LAB_CACHE ?= $(HOME)/.cache/uds-lab
export PATH := $(UDS_LAB_CACHE)/bin:$(PATH)
# Python for `make report` (matplotlib), in a virtual environment of the repository.
VENV ?= .venv

$(VENV)/.installed: report/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -r report/requirements.txt
	touch $@

##@ Lab

.PHONY: up
up: ## Start the lab (builds the app unless APP_IMAGE is set; SERVICES= a subset) and wait until healthy
	@if [ -z "$${APP_IMAGE:-}" ]; then $(COMPOSE) build app nginx-log-exporter; \
	else $(COMPOSE) build nginx-log-exporter; \
	docker image inspect "$$APP_IMAGE" >/dev/null 2>&1 || docker pull "$$APP_IMAGE"; fi
	$(COMPOSE) up -d --no-build --wait $(SERVICES)
	@echo
	@echo "uds-lab is up:"
	@echo "  nginx paths  http://127.0.0.1:$(call env,NGINX_PORT)/{tcp,uds,tcp-ka,uds-ka}/ping"
	@echo "  nginx-lo     /{tcp-lo,tcp-lo-ka,uds-lo,uds-lo-ka}/ping, inside the lab only:"
	@echo "               $(COMPOSE) exec nginx curl -s http://app:8090/tcp-lo/ping"
	@echo "  Grafana      http://127.0.0.1:$(call env,GRAFANA_PORT)/  (anonymous viewer; admin password in .env)"
	@echo "  Prometheus   http://127.0.0.1:$(call env,PROMETHEUS_PORT)/"
	@echo "Next: make load"

# The settings a run ran with (images, limits, CPU sets), for the report; no secrets.
define snapshot
	@mkdir -p results/$(TESTID)
	@$(COMPOSE) --profile load config --format json \
		| python3 -c 'import json,sys; c=json.load(sys.stdin); c["services"].pop("grafana", None); json.dump(c, sys.stdout, indent=1)' \
		> results/$(TESTID)/compose.json
	@echo $(TESTID) > results/last
endef

.PHONY: load
load: ## Drive each path in turn through nginx at a fixed rate with k6 (SCENARIO, RATE, DURATION, ROUNDS, PATHS)
	$(snapshot)
	@echo "k6 run testid=$(TESTID)"
	TESTID=$(TESTID) MODE=rate $(COMPOSE) --profile load run --rm --user "$$(id -u):$$(id -g)" k6

.PHONY: max
max: ## Find each path's throughput limit (GENERATOR=k6 or wrk, CONNECTIONS, DURATION, ROUNDS, PATHS)
	$(snapshot)
	@echo "$(call env,GENERATOR) run testid=$(TESTID), max throughput"
	@if [ "$(call env,GENERATOR)" = wrk ]; then \
		$(COMPOSE) --profile load build wrk >/dev/null && TESTID=$(TESTID) COMPOSE="$(COMPOSE)" python3 scripts/max.py; \
	elif [ "$(call env,GENERATOR)" = k6 ]; then \
		TESTID=$(TESTID) MODE=max $(COMPOSE) --profile load run --rm --user "$$(id -u):$$(id -g)" k6; \
	else echo "GENERATOR=$(call env,GENERATOR): must be k6 or wrk" >&2; exit 2; fi

.PHONY: report
report: $(VENV)/.installed ## Write results/<run>/report.md, report.json and charts for the last run (RUN=<testid> for another)
	$(VENV)/bin/python report/report.py --run "$(or $(RUN),$$(cat results/last))" \
		--prometheus http://127.0.0.1:$(call env,PROMETHEUS_PORT) --results results

.PHONY: contract
contract: ## Check an app image against the contract (APP_IMAGE=<image>; default: the lab's app) and print a table
	@if [ -z "$${APP_IMAGE:-}" ]; then $(COMPOSE) build app; \
	else docker image inspect "$$APP_IMAGE" >/dev/null 2>&1 || docker pull "$$APP_IMAGE"; fi
	$(COMPOSE) --profile contract build contract
	CONTRACT_PROJECT=$(call env,COMPOSE_PROJECT_NAME)-contract COMPOSE="$(COMPOSE)" python3 scripts/contract.py

.PHONY: down
down: ## Stop the lab; Prometheus and Grafana data are kept
	$(COMPOSE) --profile load down --remove-orphans

.PHONY: clean
clean: ## Stop the lab and delete its volumes (Prometheus data too) and the locally built images
	$(COMPOSE) --profile load down --remove-orphans --volumes
	docker image rm -f uds-lab/app:local uds-lab/nginx-log-exporter:local uds-lab/wrk:local uds-lab/contract:local >/dev/null 2>&1 || true

.PHONY: ps
ps: ## Show the lab's containers and their health
	$(COMPOSE) ps

.PHONY: logs
logs: ## Follow the lab's logs
	$(COMPOSE) logs -f --tail=100

##@ Development

# The Go modules under services/ (each its own image).
GO_SERVICES := services/app services/nginx-log-exporter services/contract services/minimal-app

.PHONY: deps
deps: ## Install the test tools that are missing (nginx, envsubst, promtool)
	scripts/test-deps.sh

.PHONY: check
check: deps ## Static checks: gofmt, go vet, nginx -t, promtool, compose file, dashboards
	@test -z "$$(gofmt -l services tests)" || { gofmt -l services tests; echo "gofmt: files above need formatting"; exit 1; }
	for m in $(GO_SERVICES) tests; do (cd $$m && go vet ./...); done
	cd tests && go test -count=1 ./static/...

.PHONY: test
test: check $(VENV)/.installed ## All tests but e2e: static checks, unit tests (Go, Python), a short fuzz, nginx + app integration
	for m in $(GO_SERVICES); do (cd $$m && go test -count=1 -race ./...); done
	$(MAKE) fuzz
	$(VENV)/bin/python -m pytest -q report scripts
	cd tests && go test -count=1 ./integration/...

FUZZTIME ?= 5s
.PHONY: fuzz
fuzz: ## Fuzz the app's route parameters for FUZZTIME (5s; longer by hand, e.g. FUZZTIME=10m)
	cd services/app && go test -run='^$$' -fuzz='^FuzzRouteParams$$' -fuzztime=$(FUZZTIME) .

.PHONY: e2e
e2e: ## The real stack under a Docker engine with locally built stand-in images (see tests/e2e)
	tests/e2e/run.sh

.PHONY: dashboards
dashboards: ## Regenerate grafana/dashboards/*.json from grafana/dashboards.py
	python3 grafana/dashboards.py

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} \
		/^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)
