#!/usr/bin/env bash
# make e2e: runs the users' compose.yaml and Makefile under a real Docker engine,
# with stand-in images built on this machine (no registry here), and checks the
# lab through Prometheus's HTTP API. Installs and starts what it needs; stops
# the engine at the end if it started it. Never skips: no engine is a failure.
# Last, it runs the lab once more with / made a private mount (as on Docker
# Desktop, rootless Docker, WSL2 without systemd), and makes / shared again
# whatever happens (other work on this engine needs node-exporter's rslave).
# E2E_RUN=<regexp> runs only the tests it matches (go test -run), for work on one.
set -euo pipefail
cd "$(dirname "$0")/../.."
t0=$(date +%s)
log() { printf '[e2e %(%H:%M:%S)T +%ss] %s\n' -1 $(($(date +%s) - t0)) "$*"; }

filter=${E2E_RUN:-.}
log "tools: docker.io, debootstrap, compose $(scripts/dotenv.sh COMPOSE_VERSION), promtool, helm"
scripts/step.sh "e2e tools" scripts/test-deps.sh docker debootstrap compose promtool k8s >/dev/null
# The Kubernetes node (only TestKubernetes, the last test, needs it) builds in
# the background, niced, while the Compose scenarios run: minutes on a new
# machine, nothing once cached. node.sh asks for it too and waits for this
# build (scripts/test-deps.sh holds a lock while it builds).
nodepid="" nodelog=$(mktemp)
if echo TestKubernetes | grep -Eq -- "$filter"; then
  log "the Kubernetes node: building in the background where not cached (log: $nodelog)"
  setsid nice -n 19 scripts/test-deps.sh k8s-node >"$nodelog" 2>&1 &
  nodepid=$!
fi
log "engine"
state=$(tests/e2e/engine.sh start) || { log "FAIL: no Docker engine could be started (see above)"; exit 1; }
root_private="" out=""
declare -A sidepid=() sideout=() # the labs beside TestLab's: their go test processes and outputs
cleanup() {
  local p
  for p in "${sidepid[@]}"; do
    if kill -0 "$p" 2>/dev/null; then kill -- "-$p" 2>/dev/null; wait "$p" 2>/dev/null; fi
  done
  # Each may find the watchdog already gone; none may end the cleanup (set -e).
  if [ -n "${watchpid:-}" ]; then
    pkill -P "$watchpid" 2>/dev/null || true
    kill "$watchpid" 2>/dev/null || true
    wait "$watchpid" 2>/dev/null || true
  fi
  rm -f "$out" "${sideout[@]}"
  rm -rf "${UDS_LAB_E2E_LOCKS:-}"
  if [ -n "$nodepid" ] && kill -0 "$nodepid" 2>/dev/null; then kill -- "-$nodepid" 2>/dev/null; fi
  rm -f "$nodelog"
  if [ -n "$root_private" ]; then mount --make-rshared / && log "/ is a shared mount again"; fi
  if [ "$state" = started ]; then log "stopping the engine this run started"; tests/e2e/engine.sh stop; fi
}
trap cleanup EXIT
# Debian bookworm's dockerd (20.10.24) can deadlock when containers on one
# network exit together (moby/moby#46661, fixed in 20.10.27): every call that
# needs its networks then waits forever (seen: make clean hung 25 minutes).
# The watchdog asks for the networks every 30 s; when that takes over 60 s
# twice running, it restarts the engine it started (engine.sh restart: the
# containers run on), writing "restarting" then "restarted" (or "failed") in
# $UDS_LAB_E2E_LOCKS/engine-restarts, and mk and down (e2e_test.go) run a
# command the restart cut short once more when it is back.
watchdog() {
  local slow=0
  while sleep 30 >/dev/null 2>&1; do
    if timeout 60 docker network ls >/dev/null 2>&1; then slow=0; continue; fi
    slow=$((slow + 1))
    [ "$slow" -ge 2 ] || continue
    log "the engine stopped answering (docker network ls over 60 s, twice): restarting it"
    echo restarting >>"$UDS_LAB_E2E_LOCKS/engine-restarts"
    if tests/e2e/engine.sh restart >/dev/null; then echo restarted; else echo failed; fi >>"$UDS_LAB_E2E_LOCKS/engine-restarts"
    slow=0
  done
}
trap 'exit 130' INT
trap 'exit 143' TERM
docker version --format 'engine {{.Server.Version}}, client {{.Client.Version}}'
docker compose version

log "stand-in images"
standins=$(scripts/step.sh "stand-in images" tests/e2e/standins.sh)
echo "$standins"
set -a
eval "$standins"
# Its own project and test run, so a lab a developer has running is untouched,
# and ports nothing listens on (fixed ones were taken by other processes here).
# Two more labs run beside TestLab's (tests/e2e/labs_test.go), each in a go
# test process of its own with a project, ports and image tag of its own: the
# apps lab (TestOverloadAndStop, TestDoctor, TestApps) and the stacks lab
# (TestStacks). A lock in UDS_LAB_E2E_LOCKS keeps their first make up apart.
COMPOSE_PROJECT_NAME=uds-lab-e2e
UDS_LAB_E2E_LOCKS=$(mktemp -d)
picked=""
for v in NGINX_PORT PROMETHEUS_PORT GRAFANA_PORT APPS_NGINX_PORT APPS_PROMETHEUS_PORT APPS_GRAFANA_PORT \
  STACKS_NGINX_PORT STACKS_PROMETHEUS_PORT STACKS_GRAFANA_PORT; do
  while p=$((20000 + RANDOM % 30000)); case " $picked " in *" $p "*) true ;; *) (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null ;; esac; do :; done
  picked="$picked $p"; printf -v "$v" %s "$p"
done
SERVICES="app nginx nginx-lo nginx-log-exporter nginx-exporter prometheus node-exporter cadvisor"
# compose.yaml as users run it, then what the test bed cannot run as it asks
# (cAdvisor unprivileged: the file says why). The Makefile's and the tests'
# `docker compose` read both.
COMPOSE_FILE=$PWD/compose.yaml:$PWD/tests/e2e/compose.testbed.yaml
# make load's interleaved stream at its shortest (10 blocks) wherever a scenario
# runs make load for something else; the load scenario asks for its own.
INTERLEAVE=10
# make contract waits this long for an app to close an idle kept connection
# (10 s by default): the pitfall app closes after 1 s, the others outlast it.
CONTRACT_IDLE_WAIT=3s
UDS_LAB_E2E=1
set +a
watchpid=""
if [ "$state" = started ]; then watchdog & watchpid=$!; fi
log "left out of this run (cannot be built on the test bed: README.md, \"Tests\"):"
echo "  grafana: no Debian package and its Go module is not available"
log "cadvisor: the project's own main over cAdvisor's library (docs/tests.md: what differs from the official image)"

# E2E_RUN: a go test -run pattern, to run one test (e.g. E2E_RUN=TestOverloadAndStop).
log "ports: nginx $NGINX_PORT, prometheus $PROMETHEUS_PORT, grafana $GRAFANA_PORT; the apps lab: $APPS_NGINX_PORT, $APPS_PROMETHEUS_PORT, $APPS_GRAFANA_PORT; the stacks lab: $STACKS_NGINX_PORT, $STACKS_PROMETHEUS_PORT, $STACKS_GRAFANA_PORT"

status=0
# go test -v's output is kept, to repeat the failed tests' messages at the end.
out=$(mktemp)
alltests=$(cd tests && go test -list . ./e2e/ | grep '^Test')
# side NAME TESTS: go test ./e2e -run TESTS (a|b) in the background, in the lab
# named NAME (its project, image tag and NAME_*_PORT ports), where E2E_RUN
# selects one of them; every other test skipped by name, so that E2E_RUN's
# pattern still selects within them.
side() {
  local name=$1 tests=$2 upper others
  echo "$tests" | tr '|' '\n' | grep -Eq -- "${filter%%/*}" || return 0
  upper=$(echo "$name" | tr '[:lower:]' '[:upper:]')
  local nport=${upper}_NGINX_PORT pport=${upper}_PROMETHEUS_PORT gport=${upper}_GRAFANA_PORT
  others=$(echo "$alltests" | grep -Evx -- "$tests" | paste -sd'|')
  sideout["$name"]=$(mktemp)
  log "go test ./e2e -run '$tests' in the $name lab, in the background (its output follows TestLab's)"
  # exec setsid: the background job is its own process group, for cleanup to stop.
  (cd tests && COMPOSE_PROJECT_NAME=uds-lab-e2e-$name LAB_IMAGE_TAG=e2e-$name NGINX_PORT=${!nport} \
    PROMETHEUS_PORT=${!pport} GRAFANA_PORT=${!gport} exec setsid ../scripts/step.sh "go test ./e2e: $name" \
    go test -count=1 -v -timeout 40m -run "$filter" -skip "^($others)\$" ./e2e/) >"${sideout[$name]}" 2>&1 &
  sidepid["$name"]=$!
}
APPS_TESTS='TestOverloadAndStop|TestDoctor|TestApps' STACKS_TESTS=TestStacks
side apps "$APPS_TESTS"
side stacks "$STACKS_TESTS"
log "go test ./e2e"
(cd tests && ../scripts/step.sh "go test ./e2e" go test -count=1 -v -timeout 40m -run "$filter" \
  -skip "^($APPS_TESTS|$STACKS_TESTS)\$" ./e2e/) 2>&1 | tee "$out" || status=$?
for name in apps stacks; do
  [ -n "${sidepid[$name]:-}" ] || continue
  s=0; wait "${sidepid[$name]}" || s=$?
  [ "$s" = 0 ] || status=$s
  log "go test ./e2e in the $name lab: exit $s; its output:"
  tee -a "$out" <"${sideout[$name]}"
  unset "sidepid[$name]"
done
if [ -n "$nodepid" ] && ! wait "$nodepid"; then
  log "the background build of the Kubernetes node failed (node.sh tried again, above); its log:"
  tail -20 "$nodelog"
fi
nodepid=""

if ! echo TestPrivateRoot | grep -Eq -- "$filter"; then
  log "TestPrivateRoot: not in E2E_RUN=$filter"
elif [ "$(findmnt -no PROPAGATION /)" != shared ]; then
  log "FAIL: / is not a shared mount before the test (findmnt: $(findmnt -no PROPAGATION /))"; status=1
elif [ "$(id -u)" != 0 ]; then
  log "FAIL: making / private needs root"; status=1
else
  root_private=1
  mount --make-private /
  log "go test ./e2e -run TestPrivateRoot: / a private mount"
  # Without cAdvisor, so that the report's naming of a missing figure and
  # why (nginx CPU per request: cAdvisor not running) is proven on a real one.
  (cd tests && SERVICES=${SERVICES% cadvisor} UDS_LAB_E2E_PRIVATE_ROOT=1 ../scripts/step.sh "go test ./e2e: / private" \
    go test -count=1 -v -timeout 15m -run '^TestPrivateRoot$' ./e2e/) 2>&1 | tee -a "$out" || status=$?
  mount --make-rshared / && root_private="" && log "/ is a shared mount again"
fi
[ "$status" = 0 ] || (cd tests && go tool test2json -t <"$out" | python3 e2e/failures.py)
log "done: exit $status"
exit $status
