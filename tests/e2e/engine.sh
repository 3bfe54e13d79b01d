#!/usr/bin/env bash
# Starts a Docker engine if none answers, and says whether it did.
#   tests/e2e/engine.sh start   -> prints "started" or "running"; exits 1 with the reason if none can start
#   tests/e2e/engine.sh stop    -> stops the engine this script started (pid file), nothing else
set -euo pipefail
PIDFILE=${UDS_LAB_CACHE:-$HOME/.cache/uds-lab}/dockerd.pid
LOG=${UDS_LAB_CACHE:-$HOME/.cache/uds-lab}/dockerd.log

case ${1:-} in
  start)
    if docker info >/dev/null 2>&1; then echo running; exit 0; fi
    command -v dockerd >/dev/null || { echo "no dockerd: scripts/test-deps.sh docker installs it" >&2; exit 1; }
    [ "$(id -u)" = 0 ] || { echo "no Docker engine answers and starting one needs root" >&2; exit 1; }
    mkdir -p "$(dirname "$PIDFILE")"
    # systemd hosts mount / shared; a bare container or VM may not, and then
    # node-exporter's `/:/host:ro,rslave` volume is refused. Make it as on a host.
    if ! findmnt -no PROPAGATION / | grep -q shared; then mount --make-rshared /; fi
    # setsid: the engine outlives this script until `stop`. It must not inherit
    # any other file descriptor: run under `flock /tmp/uds-lab-docker.lock`,
    # the lock's descriptor would go with it and the lock stay held as long as
    # the engine runs (seen: every later flock waited forever).
    (
      for fd in /proc/self/fd/*; do
        fd=${fd##*/}
        if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
      done
      exec setsid dockerd >"$LOG" 2>&1 < /dev/null
    ) &
    echo $! >"$PIDFILE"
    for _ in $(seq 60); do
      docker info >/dev/null 2>&1 && { echo started; exit 0; }
      kill -0 "$(cat "$PIDFILE")" 2>/dev/null || break
      sleep 1
    done
    echo "dockerd did not come up; last lines of $LOG:" >&2
    tail -20 "$LOG" >&2
    exit 1 ;;
  stop)
    [ -f "$PIDFILE" ] || exit 0
    pid=$(cat "$PIDFILE"); rm -f "$PIDFILE"
    kill "$pid" 2>/dev/null || exit 0
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 1; done
    kill -9 "$pid" 2>/dev/null || true ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
