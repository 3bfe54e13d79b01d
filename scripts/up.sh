#!/usr/bin/env bash
# make up, step by step: what make doctor says will run, the images, the lab
# (the core services, then each watcher that can run), and the loopback
# connection-tracking setting (APP_LO_NOTRACK). `scripts/up.sh notrack` applies
# that setting alone, for a run that recreated the app (loadgen/run.sh): one
# place for it. Runs on the host: bash 3.2 (macOS) is enough.
# From make: COMPOSE; SERVICES and APP_IMAGE from your shell or make's command
# line; APP_LO_NOTRACK from there or .env.
set -euo pipefail
cd "$(dirname "$0")/.."
read -ra COMPOSE <<<"${COMPOSE:-docker compose}"
# Your shell or make's command line wins over .env, as for compose.
APP_LO_NOTRACK=${APP_LO_NOTRACK:-$(scripts/dotenv.sh APP_LO_NOTRACK || true)}

fail() { echo "make up: $*" >&2; exit 2; }
quietly() { "$@" >/dev/null 2>&1 || true; }

# The doctor's plan: UP_CORE, UP_OPTIONAL, UP_LEFT_OUT, NODE_EXPORTER_ROOT_MOUNT.
plan() {
  local p
  p=$(scripts/doctor.sh --up) || exit 1
  set -a
  eval "$p"
  set +a
}

# What the lab builds, and the app image if it is yours (pulled if missing).
build() {
  if [ -z "${APP_IMAGE:-}" ]; then
    "${COMPOSE[@]}" build app nginx-log-exporter prometheus-auth
    return
  fi
  "${COMPOSE[@]}" build nginx-log-exporter prometheus-auth
  docker image inspect "$APP_IMAGE" >/dev/null 2>&1 || docker pull "$APP_IMAGE" ||
    fail "APP_IMAGE=$APP_IMAGE: not on this machine and cannot be pulled (docker said why, above); a reference stack's is built with docker build -t $APP_IMAGE stacks/<stack> (stacks/README.md)"
}

pull() {
  # shellcheck disable=SC2086 # word lists from the doctor's plan
  "${COMPOSE[@]}" pull --policy missing --ignore-buildable $UP_CORE $UP_OPTIONAL 2>&1 |
    { grep -v "Skipped - Image is already present" || true; } ||
    fail "an image the lab needs is not on this machine and cannot be pulled (above: which, and why): nothing was started"
}

# The core first (waiting until healthy), then each watcher on its own: one
# that cannot start is left out, not the lab.
start() {
  local s
  for s in $UP_LEFT_OUT; do quietly "${COMPOSE[@]}" rm -fsv "$s"; done
  for s in $UP_OPTIONAL; do quietly "${COMPOSE[@]}" up -d --no-build --no-deps "$s"; done
  # shellcheck disable=SC2086
  "${COMPOSE[@]}" up -d --no-build --wait $UP_CORE
  for s in $UP_OPTIONAL; do
    "${COMPOSE[@]}" up -d --no-build --no-deps --wait "$s" || {
      echo "make up: $s did not start: left out (${COMPOSE[*]} logs $s says why)" >&2
      quietly "${COMPOSE[@]}" rm -fsv "$s"
    }
  done
  scripts/doctor.sh --cadvisor-check || quietly "${COMPOSE[@]}" rm -fsv cadvisor
}

# APP_LO_NOTRACK: 1 turns loopback connection tracking off in the app's
# namespace, 0 back on, empty leaves it alone (services/notrack).
notrack() {
  [ -n "${APP_LO_NOTRACK:-}" ] || return 0
  "${COMPOSE[@]}" --profile notrack run --rm --build --no-deps notrack >/dev/null ||
    fail "APP_LO_NOTRACK=$APP_LO_NOTRACK could not be applied (${COMPOSE[*]} --profile notrack run --rm notrack says why)"
  echo "loopback connection tracking in the app's namespace: $([ "$APP_LO_NOTRACK" = 1 ] && echo off || echo on) (APP_LO_NOTRACK)"
}

case "${1:-}" in
  notrack) notrack ;;
  "") plan; build; pull; start; notrack ;;
  *) fail "unknown step \"$1\" (scripts/up.sh [notrack])" ;;
esac
