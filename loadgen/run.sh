#!/usr/bin/env bash
# One run of `make load` (MODE=rate), `make max` (MODE=max), `make sweep`
# (MODE=sweep) or `make floor` (MODE=floor). The run's program is
# loadgen/drive.py (compose's drive service: the report's image, no network):
# it plans, judges each batch or step, and names what runs next, in its last
# line: `run <service> NAME=value ...` or `done <exit code>`. This script only
# starts what it names, since each generator is a container of its own (its
# CPU set, network namespace and group), and keeps what only the host can do:
# the settings the run ran with (compose.json, for the report), make floor's
# servers, APP_LO_NOTRACK's rules and TRAFFIC's files.
#
# From make: COMPOSE, TESTID, MODE, GENERATOR and the settings settings.toml
# marks for run.sh (APP_LO_NOTRACK, TRAFFIC); the rest of the run's settings
# reach the containers from the environment, as compose passes them on.
# Exit: the generator's (1: a threshold failed: more than 1% of requests failed, or of a phase's dropped), 2: a bad setting.
set -euo pipefail
: "${COMPOSE:?}" "${TESTID:?}" "${MODE:?}"
GENERATOR=${GENERATOR:-}
export TESTID MODE GENERATOR
user="$(id -u):$(id -g)"
dir=results/$TESTID

# make load TRAFFIC=<your access logs, a comma list>: each file read-only into
# the run's program alone (/traffic/<k>/<its name>), which writes the replay's
# schedule (loadgen/replay.py); nothing else of a log reaches a container.
traffic=()
if [ -n "${TRAFFIC:-}" ]; then
  inside="" k=0 rest=$TRAFFIC,
  while [ -n "$rest" ]; do
    f=${rest%%,*} rest=${rest#*,}
    [ -n "$f" ] || continue
    if ! [ -f "$f" ] || ! [ -r "$f" ]; then echo "make: TRAFFIC: $f: no such readable file" >&2; exit 2; fi
    name=$(basename -- "$f" | tr -c 'A-Za-z0-9._\n-' _)
    traffic+=(-v "$(realpath -- "$f"):/traffic/$k/$name:ro")
    inside+=${inside:+,}/traffic/$k/$name k=$((k + 1))
  done
  traffic+=(-e "TRAFFIC=$inside")
fi

drive() {
  $COMPOSE --profile load run --rm --no-deps --user "$user" ${traffic[@]+"${traffic[@]}"} drive --run "$TESTID" --results results "$@"
}

# Before the first generator: the settings the run ran with (images, limits,
# CPU sets; no secrets: every service but Grafana), then what the run needs up.
settle() {
  local profiles=(--profile load --profile floor)
  # shellcheck disable=SC2046 # one argument per service: compose's service names have no spaces
  $COMPOSE "${profiles[@]}" config --format json $($COMPOSE "${profiles[@]}" config --services | grep -vx grafana) >"$dir/compose.json"
  if [ "$MODE" = floor ]; then
    # make floor: the two echo servers up (healthy: both listeners answer), taken back down whatever happens.
    $COMPOSE --profile floor build floor-near >/dev/null
    trap '$COMPOSE --profile floor rm -fsv floor-near floor-far >/dev/null 2>&1 || true; rm -f "$dir/replay.tsv"' EXIT
    $COMPOSE --profile floor up -d --no-build --wait floor-near floor-far
  fi
  # APP_LO_NOTRACK=1 (services/notrack): the app as its settings say first
  # (compose recreates it, and its network namespace, when one changed, as the
  # generator's start would), then the rules, so that the run has them.
  if [ "${APP_LO_NOTRACK:-}" = 1 ]; then
    { $COMPOSE up -d --no-build --wait app nginx nginx-lo && COMPOSE="$COMPOSE" scripts/up.sh notrack; } \
      >"$dir/notrack.log" 2>&1 || { echo "make: APP_LO_NOTRACK=1 could not be applied ($dir/notrack.log says why)" >&2; exit 2; }
  fi
}

# Starts a service drive.py named, with its settings; its exit code.
start() {
  local service=$1
  shift
  (
    for kv in "$@"; do export "${kv?}"; done
    case $service in
      floor) $COMPOSE --profile floor run --rm --no-deps --user "$user" floor ;;
      # Prometheus scrapes it by its service name, which run gives only with --use-aliases.
      openloop) $COMPOSE --profile load run --rm --use-aliases --user "$user" openloop ;;
      *) $COMPOSE --profile load run --rm --user "$user" "$service" ;;
    esac
  )
}

$COMPOSE --profile load build openloop wrk >/dev/null
$COMPOSE --profile report build report >/dev/null
# The replay's schedule holds your paths (TRAFFIC_SEND=logged): drive.py
# deletes it when the run is done, this when the run stops before.
trap 'rm -f "$dir/replay.tsv"' EXIT
rc=0 settled=
while :; do
  out=$(drive --last-rc "$rc") || { rmdir "$dir" 2>/dev/null || true; exit 2; }
  sed '$d' <<<"$out"
  read -ra next <<<"$(tail -n1 <<<"$out")"
  [ "${next[0]}" = run ] || exit "${next[1]}"
  [ -n "$settled" ] || { mkdir -p "$dir" && settle && settled=1; }
  rc=0
  start "${next[@]:1}" || rc=$?
done
