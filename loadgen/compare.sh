#!/usr/bin/env bash
# make compare: the same workloads on each stack in turn, then one comparison
# of what the socket saves on each (report/compare.py).
#
# STACKS (comma list of stacks: go, and the folders of stacks/ with a lab.env; default all: go is the lab's
# app, the others stacks/<name>/): for each, `make up` with its stacks/<name>/lab.env, `make
# load` with the same settings (SCENARIO, RATE, PATHS, ... from your shell or
# make's command line, alike for every stack) and `make report`. A stack's image
# is lab.env's APP_IMAGE, built from its folder if it is not there, or
# STACK_<NAME>_IMAGE if set (STACK_PHP_FPM_IMAGE=...). Leaves the lab on the
# lab's own app. Results: results/<TESTID>/compare.md and compare.json, and one
# run per stack, results/<TESTID>-<stack>/.
set -euo pipefail
cd "$(dirname "$0")/.."
read -ra COMPOSE <<<"${COMPOSE:-docker compose}"
MAKE=${MAKE:-make}
TESTID=${TESTID:-compare-$(date +%Y%m%d-%H%M%S)}

fail() { echo "make compare: $*" >&2; exit 2; }
log() { printf '[compare %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

[[ $TESTID =~ ^[A-Za-z0-9_.-]+$ ]] || fail "TESTID=$TESTID: use letters, digits, . _ -"
# go is the lab's app; every other stack is a folder of stacks/ with its lab.env.
known="go $(cd stacks && for d in */lab.env; do printf '%s ' "${d%/lab.env}"; done)"
# Default: every stack there is.
IFS=, read -ra stacks <<<"${STACKS:-$(tr ' ' , <<<"${known% }")}"
[ "${#stacks[@]}" -ge 1 ] || fail "STACKS is empty"
for s in "${stacks[@]}"; do
  case " $known " in *" $s "*) ;; *) fail "STACKS: unknown stack \"$s\" (known: ${known% })" ;; esac
done

# settings STACK: the lab's settings for it, one per line (its lab.env, the
# image as this machine has it).
settings() {
  [ "$1" = go ] && return 0
  local var image line
  var=STACK_$(tr 'a-z-' 'A-Z_' <<<"$1")_IMAGE
  image=${!var:-$(sed -n 's/^APP_IMAGE=//p' "stacks/$1/lab.env")}
  [ -n "$image" ] || fail "stacks/$1/lab.env names no APP_IMAGE"
  if ! docker image inspect "$image" >/dev/null 2>&1; then
    log "$1: building $image from stacks/$1" >&2
    docker build -q -t "$image" "stacks/$1" >/dev/null
  fi
  echo "APP_IMAGE=$image"
  while IFS= read -r line; do
    case $line in '' | '#'* | APP_IMAGE=*) ;; *) echo "$line" ;; esac
  done <"stacks/$1/lab.env"
}

runs=""
trap 'log "back to the lab'"'"'s app"; $MAKE -s up >/dev/null || true' EXIT
for s in "${stacks[@]}"; do
  lines=$(settings "$s") || exit 2
  # One setting a word (bash 3.2, macOS's, has no mapfile); none for go. An
  # empty array is expanded as ${set[@]+...}: bash before 4.4 calls it unset.
  set=()
  [ -z "$lines" ] || while IFS= read -r line; do set+=("$line"); done <<<"$lines"
  log "$s: make up ${set[*]:-}"
  # compose's progress goes to a log; its tail is shown if the start fails.
  mkdir -p "results/$TESTID"
  $MAKE -s up ${set[@]+"${set[@]}"} >"results/$TESTID/up-$s.log" 2>&1 || { tail -20 "results/$TESTID/up-$s.log" >&2; exit 1; }
  # The same settings: compose must not see nginx or the app as changed.
  $MAKE -s load TESTID="$TESTID-$s" ${set[@]+"${set[@]}"}
  $MAKE -s report RUN="$TESTID-$s" ${set[@]+"${set[@]}"}
  runs="${runs:+$runs,}$s=$TESTID-$s"
done
"${COMPOSE[@]}" --profile report run --rm --user "$(id -u):$(id -g)" --entrypoint python3 report \
  -m report.compare --results results --runs "$runs" --out "$TESTID"
