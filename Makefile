SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

# A value from the environment or make's command line, as given (a $ in it is
# not make's to expand), else from .env.
env = $(or $(value $(1)),$(shell scripts/dotenv.sh $(1)))
# Compose reads .env, then what make up recorded of the app it started
# (.lab/<project>/up.env: STACK, APP_IMAGE and the stack's settings,
# scripts/up.sh); a variable from your shell or this command line wins over
# both. One folder per compose project (COMPOSE_PROJECT_NAME), so that two labs
# run from one checkout keep theirs apart (make e2e runs two). Expanded at
# each use (=), so that `make up load` reads what make up just wrote.
LAB_STATE := .lab/$(call env,COMPOSE_PROJECT_NAME)
UP_ENV := $(LAB_STATE)/up.env
COMPOSE = docker compose --env-file .env $(shell [ -f $(UP_ENV) ] && echo --env-file $(UP_ENV))
# One run id per make invocation: `:=` asks the clock once (`?=` would ask it at
# every use, and a second boundary between two uses would name two runs).
TESTID := $(or $(TESTID),$(shell date +%Y%m%d-%H%M%S))
# Prometheus's remote-write receiver, for k6 alone: on only where
# PROMETHEUS_REMOTE_WRITE=true or GENERATOR=k6 (.env or the command line, at
# make up); compose.yaml's flag.
export PROMETHEUS_REMOTE_WRITE_FLAG := --$(if $(or $(filter true,$(call env,PROMETHEUS_REMOTE_WRITE)),$(filter k6,$(call env,GENERATOR))),,no-)web.enable-remote-write-receiver
# Services `make up` starts; empty means all of them.
SERVICES ?=
# Test tools built from source are cached here (scripts/test-deps.sh).
UDS_LAB_CACHE ?= $(HOME)/.cache/uds-lab
export PATH := $(UDS_LAB_CACHE)/bin:$(PATH)
# Python for the tests of report/, loadgen/ and scripts/ (make test); `make
# report` and `make max GENERATOR=wrk` run theirs in containers and need no Python here.
VENV ?= .venv

$(VENV)/.installed: report/requirements.txt report/requirements-dev.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -r report/requirements-dev.txt
	touch $@

##@ Lab

# Prometheus's password (compose.yaml's secret: every endpoint of Prometheus
# asks for it, so only the lab reads its figures, and only k6, where switched
# on, writes). Generated once, kept out of git; the
# containers that hold it run as other users, so the file is 0644 in a folder
# that is yours alone.
PASSWORD_FILE := $(call env,PROMETHEUS_PASSWORD_FILE)
$(PASSWORD_FILE):
	@[ -d "$(@D)" ] || { mkdir -p "$(@D)" && chmod 700 "$(@D)"; }
	@umask 022; od -An -N24 -tx1 /dev/urandom | tr -d ' \n' > "$@.tmp" && mv "$@.tmp" "$@"
	@echo "make: generated Prometheus's password into $@"

.PHONY: doctor
doctor: ## Check this machine's Docker for the lab: what will run, what will be missing and why, and the fix
	@scripts/doctor.sh

# make up runs the doctor's checks first: it stops on what would break the lab
# (no engine, a port taken, a CPU set beyond the cores; then, before starting
# anything, an image neither here nor pullable) and degrades the
# watchers that cannot run here (node-exporter without rslave, or left out
# like cAdvisor), so that the lab starts whenever nginx, the app, Prometheus
# and Grafana can. The watchers start first and become healthy while the core
# does (about 5 s saved); their own --wait afterwards says whether they made it.
.PHONY: up
up: $(PASSWORD_FILE) ## Start the lab (builds the app unless APP_IMAGE is set; STACK=php-fpm|gunicorn|node|uvicorn|puma a reference stack; SERVICES= a subset) and wait until healthy
	@COMPOSE="$(COMPOSE)" UP_ENV=$(UP_ENV) scripts/up.sh
	@echo
	@echo "uds-lab is up:"
	@echo "  nginx        http://127.0.0.1:$(call env,NGINX_PORT)/<path>/ping for its paths in catalogue.json"
	@echo "  nginx-lo     its paths inside the lab only, e.g."
	@echo "               $(COMPOSE) exec nginx curl -s http://app:8090/tcp-lo/ping"
	@case " $(SERVICES) " in "  "|*" grafana "*) \
		echo "  Grafana      http://127.0.0.1:$(call env,GRAFANA_PORT)/  (anonymous viewer; admin password in .env)" ;; esac
	@echo "  Prometheus   http://127.0.0.1:$(call env,PROMETHEUS_PORT)/  (user $(call env,PROMETHEUS_USER), password in $(PASSWORD_FILE))"
	@echo "Next: make load"

# results/last names a run only once its generator wrote load.json (a run
# with failed thresholds too, which the report explains), so that a run that
# failed to start leaves `make report` on the last good one.
loaded = if [ -f results/$(TESTID)/load.json ] || [ -f results/$(TESTID)/floor.json ]; then echo $(TESTID) > results/last; fi

# make load and make max drive the lab make up started; compose would start
# a part of it otherwise (no watchers, no doctor's checks) and leave it running.
define lab_is_up
	@running=" $$($(COMPOSE) ps --status running --services 2>/dev/null | tr '\n' ' ') "; \
	for s in app nginx nginx-lo prometheus; do case $$running in *" $$s "*) ;; \
		*) echo "make: the lab is not up ($$s is not running): make up first" >&2; exit 2 ;; esac; done
endef

# The run's program, loadgen/lab_run.py (the host's python3, its standard
# library alone), drives the run: the plan, the generator and, with
# PRECISION or a sweep, its later batches or steps.
# make gives it the run's id, mode and generator, and the settings it reads
# on the host itself (settings.toml's host), each from your shell or make's
# command line, else .env, in single quotes; compose reads the others.
# >>> settings.toml: host (make settings writes it)
HOST_SETTINGS := APP_LO_NOTRACK TRAFFIC
# <<< settings.toml: host
quote = '$(subst ','\'',$(1))'
run_plan = rc=0; COMPOSE="$(COMPOSE)" TESTID=$(TESTID) MODE=$(1) GENERATOR=$(2) \
	$(foreach s,$(HOST_SETTINGS),$(s)=$(call quote,$(call env,$(s)))) \
	python3 loadgen/lab_run.py compose || rc=$$?; $(loaded); exit $$rc

.PHONY: load
load: ## Compare the paths at a fixed rate (openloop; GENERATOR=k6): one stream interleaving every path (the answer), then paired rounds per path (the costs) (SCENARIO, RATE, INTERLEAVE, ROUNDS, DURATION, PATHS, SEED)
	$(lab_is_up)
	@$(call run_plan,rate,$(or $(call env,GENERATOR),openloop))

.PHONY: max
max: ## Find each path's throughput limit (wrk; GENERATOR=oha for the direct paths, or k6; CONNECTIONS, DURATION, ROUNDS, PRECISION, PATHS, SEED)
	$(lab_is_up)
	@$(call run_plan,max,$(or $(call env,GENERATOR),wrk))

# Latency against load: each path at rising fixed rates (openloop, or
# GENERATOR=oha or k6) until it fails, or flat out at rising connections
# (SWEEP=connections: wrk); report/sweep.py judges each step.
# SWEEP=envelope: the failure envelope in full. The app, nginx and nginx-lo
# start again with the app's net.core.somaxconn at APP_SOMAXCONN (16 where
# empty; contract/somaxconn.yaml), then tcp-lo and uds-lo run as
# SWEEP=connections: where the socket answers 502 and TCP queues. They stay
# so until make up.
comma := ,
ENVELOPE_ENV = COMPOSE_FILE="$(or $(COMPOSE_FILE),compose.yaml):contract/somaxconn.yaml" APP_SOMAXCONN=$(or $(call env,APP_SOMAXCONN),16)
.PHONY: sweep
sweep: ## Latency against load: every path at rising fixed rates up to and past its limit (SWEEP_RATES or SWEEP_FROM/TO/STEPS, SWEEP_ROUNDS); SWEEP=connections: flat out at SWEEP_CONNECTIONS; SWEEP=envelope: tcp-lo and uds-lo so, at APP_SOMAXCONN (16)
	$(lab_is_up)
	@$(if $(filter envelope,$(call env,SWEEP)),v="$(or $(call env,APP_SOMAXCONN),16)"; \
		{ [[ $$v =~ ^[0-9]+$$ ]] && [ "$$v" -ge 1 ] && [ "$$v" -le 65535 ]; } || \
		{ echo "make: APP_SOMAXCONN=\"$$v\": must be a whole number from 1 to 65535 (net.core.somaxconn in the app's network namespace)" >&2; exit 2; }; \
		$(ENVELOPE_ENV) $(COMPOSE) up -d --no-build --force-recreate --wait app nginx nginx-lo >/dev/null && \
		echo "make: the app at net.core.somaxconn $$($(ENVELOPE_ENV) $(COMPOSE) exec -T nginx-lo cat /proc/sys/net/core/somaxconn) (APP_SOMAXCONN; make up puts it back)" && \
		$(ENVELOPE_ENV) $(MAKE) sweep SWEEP=connections PATHS=tcp-lo$(comma)uds-lo,$(call run_plan,sweep,$(if $(filter connections,$(call env,SWEEP)),wrk,$(or $(call env,GENERATOR),openloop))))

# The transports alone, no nginx, no HTTP: services/floor, in the lab's
# network namespaces and CPU sets (catalogue.json's "floor").
.PHONY: floor
floor: ## The transports alone: round trip and connect over the socket, loopback and the bridge (ROUNDS, FLOOR_DURATION, FLOOR_SIZES, SEED)
	$(lab_is_up)
	@$(call run_plan,floor,floor)

# A benchmark of the lab itself, not of the paths: see loadgen/overhead.sh.
.PHONY: overhead
overhead: ## What observing costs each path: the full lab against nginx + app alone, and Gin against a minimal app (OVERHEAD_ROUNDS, OVERHEAD_SETUPS)
	COMPOSE="$(COMPOSE)" TESTID=overhead-$(TESTID) loadgen/overhead.sh

# One make up, load and report per stack, then one comparison (loadgen/compare.sh).
.PHONY: compare
compare: ## The same load on each stack in turn, and what the socket saves on each side by side (STACKS=go,php-fpm,... default all; SCENARIO, RATE, PATHS, ...)
	COMPOSE="$(COMPOSE)" MAKE="$(MAKE)" TESTID=compare-$(TESTID) loadgen/compare.sh

.PHONY: report
report: $(PASSWORD_FILE) ## Write results/<run>/report.md, report.json and charts for the last run (RUN=<testid> for another; a sweep: RATE=<your rate> names the nearest step)
	@$(COMPOSE) --profile report build report >/dev/null
	$(COMPOSE) --profile report run --rm --user "$$(id -u):$$(id -g)" report --run "$(or $(RUN),$$(cat results/last))" \
		$(if $(RATE),--rate "$(RATE)")

.PHONY: contract
# The app alone, in a project of its own: its settings from STACK or the
# command line, never from the running lab's up.env.
CONTRACT_ENV := $(LAB_STATE)/contract.env
contract: ## Check an app image against the contract (APP_IMAGE=<image>, default the lab's app; STACK=<a reference stack>; ENDPOINT=<a route of it>; APP_PROTOCOL=fastcgi for PHP-FPM) and print the tables
	@COMPOSE="docker compose" UP_ENV=$(CONTRACT_ENV) scripts/up.sh app
	docker compose --profile contract build contract
	CONTRACT_PROJECT=$(call env,COMPOSE_PROJECT_NAME)-contract APP_ENV_FILE=$(CONTRACT_ENV) \
		COMPOSE="docker compose --env-file .env --env-file $(CONTRACT_ENV)" python3 contract/contract.py

.PHONY: down
down: ## Stop the lab; Prometheus and Grafana data are kept
	$(COMPOSE) --profile load --profile report --profile floor --profile notrack down --remove-orphans

.PHONY: clean
clean: ## Stop the lab and delete its volumes (Prometheus data too), the locally built images and what make up recorded
	$(COMPOSE) --profile load --profile report --profile floor --profile notrack down --remove-orphans --volumes
	docker image rm -f $(foreach i,app openloop nginx-log-exporter prometheus-auth floor wrk contract report notrack,uds-lab/$(i):$(call env,LAB_IMAGE_TAG)) uds-lab/oha:$(call env,OHA_VERSION) \
		$$(for s in $$(scripts/stack.sh --list); do [ $$s = go ] || scripts/stack.sh $$s APP_IMAGE; done) >/dev/null 2>&1 || true
	rm -f $(UP_ENV) $(CONTRACT_ENV)
	rmdir $(LAB_STATE) 2>/dev/null || true

.PHONY: ps
ps: ## Show the lab's containers and their health
	$(COMPOSE) ps

.PHONY: logs
logs: ## Follow the lab's logs
	$(COMPOSE) logs -f --tail=100

##@ Kubernetes (docs/kubernetes.md)

.PHONY: k8s-up k8s-load k8s-report
k8s-up: ## Install or upgrade the lab on kubectl's current cluster and wait until ready (K8S_NAMESPACE, K8S_VALUES=<file>, K8S_SET="key=value ...")
	python3 loadgen/lab_run.py k8s up

# The run's program, loadgen/lab_run.py, on the host's Python; the judge
# (loadgen/drive.py: the pods' HDR histograms merged) and the report on
# .venv's, which has their packages.
k8s-load: $(VENV)/.installed ## A run on the cluster: the openloop Job of K8S_PODS pods, each every K8S_PODS-th request of one stream; writes results/<run>/load.json, cluster.json (K8S_SET="load.rate=200 ...")
	PYTHON=$(VENV)/bin/python python3 loadgen/lab_run.py k8s load

k8s-report: $(VENV)/.installed ## The report of the last cluster run (RUN=<id> for another), through a port-forward to the cluster's Prometheus
	PYTHON=$(VENV)/bin/python python3 loadgen/lab_run.py k8s report

##@ Development

# The Go modules (each its own image).
GO_SERVICES := services/app services/nginx-log-exporter services/prometheus-auth services/floor contract/checker contract/minimal-app contract/pitfall-app loadgen/openloop

# Each step of the tests stamps its start and end (scripts/step.sh), which
# scripts/ci_timings.py turns into the table in docs/tests.md.
STEP := scripts/step.sh
# pytest's workers (pytest-xdist): many of the tests wait on real processes.
PYTEST_WORKERS ?= 4

.PHONY: deps
deps: ## Install the test tools that are missing (nginx, envsubst, wrk, promtool, the linters, oha, helm, kubeconform, kube-score, kube-apiserver and etcd)
	$(STEP) deps scripts/test-deps.sh

.PHONY: check
check: deps ## Static checks: gofmt, go vet, nginx -t, promtool, compose file, dashboards
	@test -z "$$(gofmt -l services contract tests loadgen)" || { gofmt -l services contract tests loadgen; echo "gofmt: files above need formatting"; exit 1; }
	$(STEP) vet bash -ec 'for m in $(GO_SERVICES) tests; do (cd $$m && go vet ./...); done'
	cd tests && ../$(STEP) static go test -count=1 ./static/...

.PHONY: test test-native test-go
test: $(VENV)/.installed ## All tests but e2e: static checks, unit tests (Go, Python, make doctor), the Helm chart's offline checks and its install on a real kube-apiserver, a short fuzz, nginx + app integration
	$(MAKE) -j2 $(OUTPUT_SYNC) test-native test-go

# The two run side by side (make test): much of each waits on real processes.
# Each one's output is printed whole when it ends (GNU make 4's --output-sync).
# test-native (pytest, then the integration tests: nginx, the app and every
# stack as real processes) needs only Debian's packages and oha, so on a new
# machine it runs while test-go's check builds the other tools (and finds oha
# built).
OUTPUT_SYNC := $(if $(filter 3.%,$(MAKE_VERSION)),,--output-sync=target)
test-native: $(VENV)/.installed
	$(STEP) "deps: apt, oha" scripts/test-deps.sh apt oha >/dev/null
	$(STEP) pytest $(VENV)/bin/python -m pytest -q -n $(PYTEST_WORKERS) report loadgen contract scripts tests/mutations
	cd tests && ../$(STEP) integration go test -count=1 ./integration/...

test-go: check
	$(STEP) "Go unit tests" bash -ec 'for m in $(GO_SERVICES); do (cd $$m && go test -count=1 -race ./...); done'
	$(STEP) fuzz $(MAKE) fuzz
	cd tests && ../$(STEP) doctor go test -count=1 ./doctor/...
	cd tests && ../$(STEP) "Helm chart (kube-apiserver)" go test -count=1 ./k8s/...

.PHONY: mutate
mutate: $(VENV)/.installed ## Check the tests catch each one-line bug of tests/mutations/mutations.toml (on demand, about 25 minutes; MUTATE="--set fresh" or "--only ID")
	$(VENV)/bin/python tests/mutations/mutate.py $(MUTATE)

.PHONY: mutate-tools
mutate-tools: ## Mutation testing by gremlins (Go) and mutmut (the report's Python) on the committed tree: survivors per module (on demand, about an hour on 2 cores; MUTATE_TOOLS="--go loadgen/openloop --py report/stats.py")
	python3 tests/mutations/tools.py $(MUTATE_TOOLS)

# A count of executions, not a duration: Go 1.26's fuzz coordinator can fail a
# duration's run with "context deadline exceeded" as it ends (go.dev/issue/75804,
# fixed in Go 1.27), which a fresh-clone CI run hit.
FUZZTIME ?= 5000x
.PHONY: fuzz
fuzz: ## Fuzz the app's route parameters for FUZZTIME (5000x executions, a few seconds; longer by hand, e.g. FUZZTIME=1000000x)
	cd services/app && go test -run='^$$' -fuzz='^FuzzRouteParams$$' -fuzztime=$(FUZZTIME) .

.PHONY: e2e
e2e: ## The real stack under a Docker engine with locally built stand-in images (see tests/e2e)
	tests/e2e/run.sh

.PHONY: settings
settings: ## Write what settings.toml declares: .env, docs/configuration.md's tables, compose.yaml's environment lists, the chart's values (scripts/settings.py)
	python3 scripts/settings.py

.PHONY: dashboards
dashboards: ## Regenerate grafana/dashboards/*.json from grafana/dashboards.py
	PYTHONPATH=. python3 grafana/dashboards.py

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} \
		/^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)
