#!/usr/bin/env bash
# make overhead: what the lab's own observing costs the paths it measures.
# A benchmark, not a test: it prints figures and a verdict per path, and
# never fails on a figure.
#
# Setups (OVERHEAD_SETUPS, comma list, in this order in odd rounds and in
# reverse in even ones, so drift over time falls on each setup alike):
#   full     the lab as `make up` left it: nginx's access log to
#            nginx-log-exporter, Prometheus scraping every 5 s, the exporters,
#            node-exporter and cAdvisor where they run
#   bare     nginx, nginx-lo and the app alone: access log off, every other
#            service stopped
#   minimal  bare, with the minimal net/http app (contract/minimal-app) in
#            place of the Gin app: what the framework costs
# In each setup and round, every path in PATHS: wrk flat out for DURATION
# seconds (the throughput limit), then openloop at RATE (the median latency), each
# after WARMUP seconds of warm-up per path. Neither generator writes to
# Prometheus here (it would be stopped in bare), so the client side is the
# same in every setup. NGINX_CPUSET, APP_CPUSET and LOADGEN_CPUSET pin as in
# make load; set them (.env, "Resources") or the figures are noise.
#
# Needs the lab up (`make up`); leaves it as the full setup. Results:
# results/<TESTID>/overhead.md and overhead.json, one load.json per
# measurement beside them.
set -euo pipefail
cd "$(dirname "$0")/.."
read -ra COMPOSE <<<"${COMPOSE:-docker compose}"
TESTID=${TESTID:-overhead-$(date +%Y%m%d-%H%M%S)}
ROUNDS=${OVERHEAD_ROUNDS:-3}
SETUPS=${OVERHEAD_SETUPS:-full,bare,minimal}
SETTLE=${OVERHEAD_SETTLE:-5}
MINIMAL_IMAGE=${MINIMAL_IMAGE:-uds-lab/minimal-app:local}
# The lab's own services that are not part of the measured pair.
CORE="app nginx nginx-lo"

fail() { echo "make overhead: $*" >&2; exit 2; }
LOG=results/$TESTID/setup.log
# quietly CMD...: compose's progress goes to setup.log; its tail is shown on failure.
quietly() { "$@" >>"$LOG" 2>&1 || { tail -20 "$LOG" >&2; return 1; }; }
log() { printf '[overhead %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

{ [[ $ROUNDS =~ ^[0-9]+$ ]] && [ "$ROUNDS" -ge 3 ]; } || fail "OVERHEAD_ROUNDS=$ROUNDS: must be a whole number >= 3 (a spread needs rounds)"
[[ $SETTLE =~ ^[0-9]+$ ]] || fail "OVERHEAD_SETTLE=$SETTLE: must be a whole number of seconds"
[[ $TESTID =~ ^[A-Za-z0-9_.-]+$ ]] || fail "TESTID=$TESTID: use letters, digits, . _ -"
IFS=, read -ra setups <<<"$SETUPS"
[ "${#setups[@]}" -ge 2 ] || fail "OVERHEAD_SETUPS=$SETUPS: name at least two of full, bare, minimal"
for s in "${setups[@]}"; do
  case $s in full | bare | minimal) ;; *) fail "OVERHEAD_SETUPS: unknown setup \"$s\" (known: full, bare, minimal)" ;; esac
done

# The full setup is what is running now.
running=$("${COMPOSE[@]}" ps --status running --services)
for s in $CORE; do
  grep -qx "$s" <<<"$running" || fail "$s is not running: start the lab first (make up)"
done
watchers=$(grep -vxF -f <(tr ' ' '\n' <<<"$CORE") <<<"$running" | tr '\n' ' ')
log "run $TESTID: setups ${SETUPS}, $ROUNDS rounds; full adds: ${watchers:-nothing}"

mkdir -p "results/$TESTID"
quietly "${COMPOSE[@]}" --profile load build wrk
dotenv() { scripts/dotenv.sh "$1"; } # .env, read as compose reads it
if [[ ,$SETUPS, == *,minimal,* ]]; then
  GO_IMAGE=${GO_IMAGE:-$(dotenv GO_IMAGE)} APP_RUNTIME_IMAGE=${APP_RUNTIME_IMAGE:-$(dotenv APP_RUNTIME_IMAGE)}
  quietly docker build -q -t "$MINIMAL_IMAGE" --build-arg "GO_IMAGE=${GO_IMAGE}" \
    --build-arg "RUNTIME_IMAGE=${APP_RUNTIME_IMAGE}" contract/minimal-app
fi

# setup NAME: bring the lab into that setup. nginx and nginx-lo start afresh in
# every setup (nginx-lo lives in the app's network namespace, and both resolve
# the app and the syslog server only at start).
setup() {
  local app_image=${APP_IMAGE:-} accesslog=(env NGINX_ACCESS_LOG=off)
  case $1 in
    full)
      accesslog=(env) # the access log make up started nginx with (.env or your shell)
      # shellcheck disable=SC2086
      [ -z "$watchers" ] || quietly "${COMPOSE[@]}" up -d --no-build --wait $watchers ;;
    bare | minimal)
      # shellcheck disable=SC2086
      [ -z "$watchers" ] || quietly "${COMPOSE[@]}" stop $watchers
      [ "$1" = bare ] || app_image=$MINIMAL_IMAGE ;;
  esac
  APP_IMAGE=$app_image quietly "${COMPOSE[@]}" up -d --no-build --no-deps --wait app
  APP_IMAGE=$app_image quietly "${accesslog[@]}" "${COMPOSE[@]}" up -d --no-build --no-deps --force-recreate --wait nginx nginx-lo
  sleep "$SETTLE"
}

# measure SETUP ROUND: the limit (wrk) and the latency at RATE (openloop) of every
# path, into results/<TESTID>/<setup>-r<round>/{max,rate}.json (each generator
# writes results/<its TESTID>/load.json; a TESTID has no slash).
measure() {
  local id=$TESTID.$1-r$2 dir=results/$TESTID/$1-r$2 user
  user="$(id -u):$(id -g)"
  mkdir -p "$dir"
  # IDLE=0: no idle phase (no report reads these runs; the throughput and
  # latency need no background to subtract).
  TESTID=$id ROUNDS=1 IDLE=0 "${COMPOSE[@]}" --profile load run --rm --no-deps --user "$user" wrk >"$dir/wrk.log"
  mv "results/$id/load.json" "$dir/max.json"
  # openloop runs the plan plan.py writes (make load: loadgen/drive.py writes it), here in the wrk image.
  TESTID=$id ROUNDS=1 IDLE=0 MODE=rate GENERATOR=openloop "${COMPOSE[@]}" --profile load run --rm --no-deps --user "$user" \
    --entrypoint python3 wrk /lab/loadgen/plan.py
  TESTID=$id "${COMPOSE[@]}" --profile load run --rm --no-deps --user "$user" \
    openloop >"$dir/openloop.log" 2>&1
  mv "results/$id/load.json" "$dir/rate.json"
  rm "results/$id/plan.json"
  rmdir "results/$id"
}

mkdir -p "results/$TESTID"
for ((r = 1; r <= ROUNDS; r++)); do
  order=("${setups[@]}")
  if ((r % 2 == 0)); then
    order=()
    for ((i = ${#setups[@]} - 1; i >= 0; i--)); do order+=("${setups[$i]}"); done
  fi
  for s in "${order[@]}"; do
    log "round $r/$ROUNDS: $s"
    setup "$s"
    measure "$s" "$r"
  done
done
log "back to the full setup"
setup full

"${COMPOSE[@]}" --profile load run --rm --no-deps --user "$(id -u):$(id -g)" \
  --entrypoint python3 wrk /lab/loadgen/overhead.py "/lab/results/$TESTID"
