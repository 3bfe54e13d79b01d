#!/usr/bin/env bash
# make compare: the same workloads on each stack in turn, then one comparison
# of what the socket saves on each (report/compare.py).
#
# STACKS (comma list of stacks, scripts/stack.sh --list: go, the lab's app, and
# the folders of stacks/; default all): for each, `make up STACK=<stack>` (its
# stacks/<name>/stack.env's settings, its image built from its folder, or
# STACK_<NAME>_IMAGE if set, e.g. STACK_PHP_FPM_IMAGE=...), then `make load`
# with your settings (SCENARIO, RATE, PATHS, ... from your shell or make's
# command line, alike for every stack) and `make report`; make up records the
# stack for both. Leaves the lab on the lab's own app. Results:
# results/<TESTID>/compare.md and compare.json, and one run per stack,
# results/<TESTID>-<stack>/.
set -euo pipefail
cd "$(dirname "$0")/.."
read -ra COMPOSE <<<"${COMPOSE:-docker compose}"
MAKE=${MAKE:-make}
TESTID=${TESTID:-compare-$(date +%Y%m%d-%H%M%S)}

fail() { echo "make compare: $*" >&2; exit 2; }
log() { printf '[compare %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

[[ $TESTID =~ ^[A-Za-z0-9_.-]+$ ]] || fail "TESTID=$TESTID: use letters, digits, . _ -"
known=$(scripts/stack.sh --list)
# Default: every stack there is.
IFS=, read -ra stacks <<<"${STACKS:-$(tr ' ' , <<<"$known")}"
[ "${#stacks[@]}" -ge 1 ] || fail "STACKS is empty"
for s in "${stacks[@]}"; do
  case " $known " in *" $s "*) ;; *) fail "STACKS: unknown stack \"$s\" (known: $known)" ;; esac
done

# settings STACK: make up's settings for it, one a line: STACK, and the image
# named in the shell (a stand-in's) if there is one.
settings() {
  [ "$1" = go ] && return 0
  local var
  var=STACK_$(tr 'a-z-' 'A-Z_' <<<"$1")_IMAGE
  echo "STACK=$1"
  [ -z "${!var:-}" ] || echo "APP_IMAGE=${!var}"
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
  # make up recorded the stack (.lab/<project>/up.env): load and report see the same app.
  $MAKE -s load TESTID="$TESTID-$s"
  $MAKE -s report RUN="$TESTID-$s"
  runs="${runs:+$runs,}$s=$TESTID-$s"
done
"${COMPOSE[@]}" --profile report run --rm --user "$(id -u):$(id -g)" --entrypoint python3 report \
  -m report.compare --results results --runs "$runs" --out "$TESTID"
