#!/usr/bin/env bash
# One run of `make load` (MODE=rate, k6), `make max` (MODE=max, GENERATOR=k6
# or wrk), `make sweep` (MODE=sweep, k6) or `make floor` (MODE=floor,
# services/floor): the plan (loadgen/plan.py, in the wrk image: the host needs no
# Python), the settings the run ran with (compose.json, for the report), the
# generator; then, with PRECISION, the second stage of Stein's procedure:
# report/precision.py (in the report's image) sizes one more batch from the
# first batch's spread (none if it already reaches PRECISION; at most
# MAX_ROUNDS in all), and after it says done. A batch continues the run's order
# of paths (same SEED, from FIRST_ROUND on) and is merged into its load.json.
#
# From make: COMPOSE, TESTID, MODE, GENERATOR, PRECISION, SWEEP, SWEEP_RATES, SWEEP_TO, APP_LO_NOTRACK; the rest of the run's
# settings from the environment, as compose passes them on.
# Exit: the generator's (1: more than 1% of requests failed), 2: a bad setting.
set -euo pipefail
: "${COMPOSE:?}" "${TESTID:?}" "${MODE:?}"
GENERATOR=${GENERATOR:-k6}
export TESTID MODE GENERATOR
user="$(id -u):$(id -g)"
dir=results/$TESTID
[ "$MODE" = floor ] || case $GENERATOR in k6 | wrk | oha) ;; *)
  echo "make: GENERATOR=\"$GENERATOR\": must be one of k6, wrk, oha" >&2; exit 2 ;; esac

# k6 runs results/<run>/plan.json (a batch: plan-r<N>.json); wrk's runner
# builds the same plan in-process. A bad setting stops here, in one line.
plan() {
  $COMPOSE --profile load run --rm --no-deps --user "$user" --entrypoint python3 wrk /lab/loadgen/plan.py
}
# Merges the batches so far into load.json and judges them: one line per
# comparison, then `next <first round> <rounds> <seed>` or `done`.
precision() {
  $COMPOSE --profile report run --rm --no-deps --user "$user" --entrypoint python3 report \
    -m report.precision --run "$TESTID" --results results
}
# Merges a sweep's last step into load.json and judges it: a line per path,
# then `next <step> <paths>` or `done`.
sweep_step() {
  $COMPOSE --profile report run --rm --no-deps --user "$user" --entrypoint python3 report \
    -m report.sweep --run "$TESTID" --results results
}
# A sweep's top when none is given: every path flat out for a few seconds
# (wrk, one round, as make max runs it), 1.2x the fastest one's requests/s.
probe() {
  local id=$TESTID-probe top
  MODE=max GENERATOR=wrk TESTID=$id ROUNDS=1 DURATION=3 WARMUP=1 IDLE=0 PRECISION='' \
    $COMPOSE --profile load run --rm --user "$user" wrk >&2 || return
  top=$($COMPOSE --profile load run --rm --no-deps --user "$user" --entrypoint python3 wrk -c \
    "import json; l = json.load(open('results/$id/load.json')); print(round(1.2 * max(p['requests'] / p['duration_s'] for p in l['phases'] if p['round'] > 0)))")
  mv "results/$id/load.json" "$dir/probe.json" && rm -rf "results/$id"
  echo "$top"
}
generate() {
  if [ "$GENERATOR" = k6 ]; then
    local file=plan.json
    [ "${FIRST_ROUND:-1}" = 1 ] || file=plan-r$FIRST_ROUND.json
    [ "${SWEEP_STEP:-1}" = 1 ] || file=plan-s$SWEEP_STEP.json
    PLAN_FILE=$file $COMPOSE --profile load run --rm --user "$user" k6
  else # wrk or oha: its runner builds the same plan in-process
    $COMPOSE --profile load run --rm --user "$user" "$GENERATOR"
  fi
}

mkdir -p "$dir"
$COMPOSE --profile load build wrk >/dev/null
if [ "$MODE" = sweep ] && [ "${SWEEP:-rate}" = rate ] && [ -z "${SWEEP_RATES:-}" ] && [ -z "${SWEEP_TO:-}" ]; then
  SWEEP_RATES=1,2 plan || { rmdir "$dir" 2>/dev/null; exit 2; }  # a bad setting stops before the probe
  echo "sweep: finding its top, each path flat out for 3 s (wrk; SWEEP_TO or SWEEP_RATES skips this)"
  SWEEP_TO=$(probe) || { echo "make sweep: the probe failed (above); give SWEEP_TO or SWEEP_RATES" >&2; exit 1; }
  export SWEEP_TO
  echo "sweep: up to SWEEP_TO=$SWEEP_TO req/s"
fi
if [ "$GENERATOR" = k6 ] || [ "$MODE" = floor ]; then plan || { rmdir "$dir" 2>/dev/null; exit 2; }; fi
# The settings the run ran with (images, limits, CPU sets); no secrets: every service but Grafana.
profiles=(--profile load --profile floor)
# shellcheck disable=SC2046 # one argument per service: compose's service names have no spaces
$COMPOSE "${profiles[@]}" config --format json $($COMPOSE "${profiles[@]}" config --services | grep -vx grafana) >"$dir/compose.json"

# make floor: the two echo servers up (healthy: both listeners answer), the
# client's plan, the servers taken back down whatever happened.
if [ "$MODE" = floor ]; then
  $COMPOSE --profile floor build floor-near >/dev/null
  trap '$COMPOSE --profile floor rm -fsv floor-near floor-far >/dev/null 2>&1 || true' EXIT
  $COMPOSE --profile floor up -d --no-build --wait floor-near floor-far
  $COMPOSE --profile floor run --rm --no-deps --user "$user" floor
  exit
fi
# APP_LO_NOTRACK=1 (services/notrack): the app as its settings say first
# (compose recreates it, and its network namespace, when one changed, as the
# generator's start would), then the rules, so that the run has them.
if [ "${APP_LO_NOTRACK:-}" = 1 ]; then
  { $COMPOSE up -d --no-build --wait app nginx nginx-lo && COMPOSE="$COMPOSE" scripts/up.sh notrack; } \
    >"$dir/notrack.log" 2>&1 || { echo "make: APP_LO_NOTRACK=1 could not be applied ($dir/notrack.log says why)" >&2; exit 2; }
fi
echo "$GENERATOR run testid=$TESTID$([ "$MODE" != max ] || echo ", max throughput")"
rc=0
generate || rc=$?
# A sweep's step past a path's limit fails k6's thresholds: expected, judged here.
if [ "$MODE" = sweep ] && [ -f "$dir/load.json" ]; then
  rc=0
  $COMPOSE --profile report build report >/dev/null
  while :; do
    out=$(sweep_step) || { echo "make sweep: the judge of the last step failed (above)" >&2; rc=1; break; }
    sed '$d' <<<"$out"
    last=$(tail -n1 <<<"$out")
    [ "${last%% *}" = next ] || break
    read -r _ step paths <<<"$last"
    export SWEEP_STEP=$step PATHS=$paths
    if [ "$GENERATOR" = k6 ]; then plan || { rc=2; break; }; fi
    generate || true # past a limit k6's thresholds fail: the judge says what that means
    [ -f "$dir/load-s$step.json" ] || {
      echo "make sweep: step $step wrote no figures (above: why); the sweep stops there" >&2; rc=1; break; }
  done
  exit $rc
fi
if [ -n "${PRECISION:-}" ] && [ $rc = 0 ] && [ -f "$dir/load.json" ]; then
  $COMPOSE --profile report build report >/dev/null
  while :; do
    out=$(precision)
    sed '$d' <<<"$out"
    last=$(tail -n1 <<<"$out")
    [ "${last%% *}" = next ] || break
    read -r _ first more seed <<<"$last"
    export FIRST_ROUND=$first ROUNDS=$more SEED=$seed
    if [ "$GENERATOR" = k6 ]; then plan; fi
    generate || { rc=$?; break; }
  done
  # A batch that failed still has its figures: merged, and judged once more.
  if [ $rc != 0 ] && ls "$dir"/load-r*.json >/dev/null 2>&1; then
    precision | sed '$d'
  fi
fi
exit $rc
