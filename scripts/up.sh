#!/usr/bin/env bash
# make up, step by step: what make doctor says will run, the images, the lab
# (the core services, then each watcher that can run), and the loopback
# connection-tracking setting (APP_LO_NOTRACK). `scripts/up.sh notrack` applies
# that setting alone, for a run that recreated the app (loadgen/lab_run.py): one
# place for it; `scripts/up.sh app` the app's settings and image alone (make
# contract). Runs on the host: bash 3.2 (macOS) is enough.
# From make: COMPOSE; SERVICES, STACK and APP_IMAGE from your shell or make's
# command line; APP_LO_NOTRACK from there or .env.
#
# STACK (a folder of stacks/): its stack.env's settings (APP_IMAGE, its
# protocol, its own settings), yours winning, and its image built from the
# folder. make up records the app it starts in UP_ENV, .lab/<project>/up.env
# (STACK, APP_IMAGE, the stack's settings): make's later commands read it after .env (the
# Makefile's COMPOSE), and the app's container its stack's own settings.
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

# Where the settings of the app it starts go (the Makefile's UP_ENV; make
# contract: its own file).
UP_ENV=${UP_ENV:-}

# STACK's settings into the environment (yours win), and what make up starts
# into UP_ENV, for the commands after it. A value compose would expand
# ($) is refused by scripts/dotenv.sh in a stack.env, and here in yours.
stack() {
  local settings line
  [ -n "$UP_ENV" ] || fail "UP_ENV: no file to record the app in (make up sets it)"
  settings=$(scripts/stack.sh "${STACK:-go}" settings) || exit 2
  # .lab is yours alone (Prometheus's password is there too).
  [ -d "$(dirname "$UP_ENV")" ] || (umask 077 && mkdir -p "$(dirname "$UP_ENV")")
  {
    echo "# Written by make up (scripts/up.sh): the app it started. Read after .env by make's commands."
    echo "STACK=${STACK:-}"
    while IFS= read -r line; do
      [ -n "$line" ] || continue
      case $line in *'$'*) fail "${line%%=*}: a value with \$ cannot be passed on to compose" ;; esac
      export "${line?}"
      echo "$line"
    done <<<"$settings"
    case $settings in *APP_IMAGE=*) ;; *) [ -z "${APP_IMAGE:-}" ] || echo "APP_IMAGE=$APP_IMAGE" ;; esac
  } >"$UP_ENV.tmp"
  mv "$UP_ENV.tmp" "$UP_ENV"
}

# What the lab builds, and the app.
build() {
  "${COMPOSE[@]}" build nginx-log-exporter prometheus-auth
  app_image
}

# The app's image: the lab's, a stack's (from its folder, unless you name
# another APP_IMAGE), or yours (pulled if missing).
app_image() {
  if [ -z "${APP_IMAGE:-}" ]; then
    "${COMPOSE[@]}" build app
    return
  fi
  if [ -n "${STACK:-}" ] && [ "$APP_IMAGE" = "$(scripts/stack.sh "$STACK" APP_IMAGE)" ]; then
    docker build -q --build-arg "BASE_IMAGE=$(scripts/stack.sh "$STACK" STACK_BASE_IMAGE)" -t "$APP_IMAGE" "stacks/$STACK" >/dev/null ||
      fail "STACK=$STACK: its image $APP_IMAGE could not be built from stacks/$STACK (docker said why, above)"
    return
  fi
  docker image inspect "$APP_IMAGE" >/dev/null 2>&1 || docker pull "$APP_IMAGE" ||
    fail "APP_IMAGE=$APP_IMAGE: not on this machine and cannot be pulled (docker said why, above); a reference stack's is built by make up STACK=<stack> (stacks/README.md)"
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
  app) stack; app_image ;; # make contract: the app alone, its settings in UP_ENV
  "") stack; plan; build; pull; start; notrack ;;
  *) fail "unknown step \"$1\" (scripts/up.sh [notrack|app])" ;;
esac
