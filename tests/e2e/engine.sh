#!/usr/bin/env bash
# Starts a Docker engine if none answers, and says whether it did.
#   tests/e2e/engine.sh start   -> prints "started" or "running"; exits 1 with the reason if none can start
#   tests/e2e/engine.sh stop    -> stops the engine this script started (pid file), nothing else
#   tests/e2e/engine.sh clean   -> what start does first: clears what a killed engine left (below)
#   tests/e2e/engine.sh restart -> the engine this script started, killed (its goroutines dumped
#                                  first) and started again; its containers run on (--live-restore)
set -euo pipefail
PIDFILE=${UDS_LAB_CACHE:-$HOME/.cache/uds-lab}/dockerd.pid
LOG=${UDS_LAB_CACHE:-$HOME/.cache/uds-lab}/dockerd.log
RUNROOT=${UDS_LAB_DOCKER_RUN:-/var/run} # dockerd's default pidfile and exec-root are under it

# An engine killed before its own cleanup leaves its pid files behind. dockerd
# and its containerd take any live pid in them for themselves still running,
# and the kernel may since have given that pid to another program (seen:
# "libcontainerd: containerd is still running", then "timeout waiting for
# containerd to start"). So: remove a pid file whose process is not the
# program it names, and stop a containerd that dockerd left orphaned (its
# parent no longer a dockerd), which a new dockerd could not reach.
clean() {
  local f want pid parent
  for f in "$RUNROOT/docker.pid:dockerd" "$RUNROOT/docker/containerd/containerd.pid:containerd"; do
    want=${f##*:} f=${f%:*}
    [ -f "$f" ] || continue
    pid=$(tr -dc 0-9 <"$f")
    if [ -z "$pid" ] || [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != "$want" ]; then
      rm -f "$f"; echo "removed $f: pid ${pid:-none} is not a running $want" >&2; continue
    fi
    [ "$want" = containerd ] || continue
    parent=$(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null || true)
    [ "$(cat "/proc/$parent/comm" 2>/dev/null)" = dockerd ] && continue
    echo "stopping containerd $pid, which its dockerd left (parent $parent)" >&2
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 10); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$f"
  done
}

case ${1:-} in
  start)
    if docker info >/dev/null 2>&1; then echo running; exit 0; fi
    command -v dockerd >/dev/null || { echo "no dockerd: scripts/test-deps.sh docker installs it" >&2; exit 1; }
    [ "$(id -u)" = 0 ] || { echo "no Docker engine answers and starting one needs root" >&2; exit 1; }
    clean
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
      # --live-restore: containers outlive the engine, so that a restart (a
      # deadlocked engine: tests/e2e/run.sh's watchdog) leaves the labs running.
      exec setsid dockerd --live-restore >"$LOG" 2>&1 < /dev/null
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
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -9 "$pid" 2>/dev/null || true
    clean ;;
  restart)
    [ -f "$PIDFILE" ] || { echo "no engine started by this script to restart" >&2; exit 1; }
    pid=$(cat "$PIDFILE")
    kill -USR1 "$pid" 2>/dev/null && sleep 2 # goroutine stacks, under its exec-root (its log says where)
    kill -9 "$pid" 2>/dev/null || true
    for _ in $(seq 10); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    rm -f "$PIDFILE"
    exec "$0" start ;;
  clean) clean ;;
  *) echo "usage: $0 start|stop|restart|clean" >&2; exit 2 ;;
esac
