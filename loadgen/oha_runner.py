#!/usr/bin/env python3
"""`make max GENERATOR=oha`: each path flat out with oha (crates.io), the load
generator here that dials the app's Unix socket as well as TCP, so that the
client straight to the app (catalogue.json's direct paths: seed 000's
experiment, no nginx) runs in the same counterbalanced rounds as the paths
through nginx. The plan and the loop are wrk_runner.py's; this file runs one
phase with oha and reads its JSON summary into the shape summary.lua gives.

compose.yaml's oha service runs this in the app's network namespace (TCP to
the app over loopback, as tcp-lo; the socket in the shared volume), on the
load generator's CPU set and limits. Exit as wrk_runner.py's.
"""
import json
import os
import subprocess
import sys
import time

import wrk_runner


# oha's word for the requests its -z deadline cut off.
DEADLINE = "aborted due to deadline"


def oha_env(env):
    """The environment as the plan reads it for oha: flat out, named oha."""
    return {**wrk_runner.wrk_env(env), "GENERATOR": "oha"}


# A sweep of rates: connections enough for 100 ms of latency per request at
# the step's rate (k6's VU budget in load.js), at most this many (the lab's
# SWEEP_CONNECTIONS top, under NGINX_MAX_IN_FLIGHT).
MAX_RATE_CONNECTIONS = 1000


def command(s, phase, url):
    """oha's command line for one phase: its connections for its length, over
    the app's socket where the phase's path is one (the URL then names the
    route only). A sweep's rate (-q) with its latencies corrected for
    coordinated omission: a slow path cannot slow the clock."""
    socket = ["--unix-socket", phase["socket"]] if phase.get("socket") else []
    conns = phase.get("connections", s["connections"])
    rate = []
    if phase.get("rate"):
        conns = max(conns, min(MAX_RATE_CONNECTIONS, -(-phase["rate"] // 10)))
        rate = ["-q", str(phase["rate"]), "--latency-correction"]
    return ["oha", "--no-tui", "--output-format", "json", "-z", f"{phase['duration_s']}s", "-c", str(conns),
            *rate, *socket, url]


def ms(seconds):
    return None if seconds is None else seconds * 1e3


def summary(doc):
    """oha's JSON as summary.lua's summary: requests, seconds, errors (no
    answer, or not 2xx/3xx), latencies in ms (p99.9 included)."""
    codes = {int(k): v for k, v in (doc.get("statusCodeDistribution") or {}).items()}
    # By oha's error message: no answer at all. The requests still in flight
    # when the phase's time is up are cut off, not failed (wrk drops them too).
    failed = {k: v for k, v in (doc.get("errorDistribution") or {}).items() if k != DEADLINE}
    non_ok = sum(v for c, v in codes.items() if not 200 <= c < 400)
    lat, sm = doc.get("latencyPercentiles") or {}, doc["summary"]
    return {
        "requests": sum(codes.values()) + sum(failed.values()),
        "duration_s": sm["total"],
        "errors": non_ok + sum(failed.values()),
        "non_2xx_3xx": non_ok,
        "by_kind": failed,
        "latency_ms": {"avg": ms(sm.get("average")), "p50": ms(lat.get("p50")), "p90": ms(lat.get("p90")),
                       "p95": ms(lat.get("p95")), "p99": ms(lat.get("p99")), "p999": ms(lat.get("p99.9")),
                       "max": ms(sm.get("slowest"))},
    }


def run_phase(s, phase, url):
    """One phase with oha: (start ms, end ms, summary). The phase's socket is
    the plan's, not load.json's: taken off it here."""
    cmd = command(s, phase, url)
    phase.pop("socket", None)
    start = int(time.time() * 1000)
    res = subprocess.run(cmd, capture_output=True, text=True)
    end = int(time.time() * 1000)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout}{res.stderr}")
    return start, end, summary(json.loads(res.stdout))


def main():
    return wrk_runner.run(oha_env(os.environ), run_phase)


if __name__ == "__main__":
    sys.exit(main())
