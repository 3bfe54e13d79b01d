#!/usr/bin/env python3
"""Benchmark, not a test: what the lab's generator (loadgen/openloop) costs.

On this machine, no Docker: Debian's nginx answers 200 on 127.0.0.1 (return
200, no upstream), and openloop, pinned to one core (taskset), runs a plan of
one path at rising fixed rates. For each rate it prints the share of
requests sent over 1 ms late, the dropped ones, the rate held and the median
and p99 from the actual send and from the due time; the highest rate with
under 1% late is what it holds on one core. Then the latency it adds: at 500
and 2,000 req/s, openloop's median from the actual send beside oha's (-q, a fixed rate, no latency correction, pinned to
the same core) against the same nginx.

    python3 loadgen/bench_openloop.py [--rates 1000,5000,...] [--duration 10]
        [--core 1] [--nginx-core 0] [--oha PATH]
Needs nginx, taskset and go on PATH; oha (scripts/test-deps.sh oha) for the
comparison. Prints a Markdown table for docs/results.md.
"""
import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

NGINX_CONF = """
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port};
        location / {{ return 200 "pong"; }}
    }}
}}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plan(dir_, url, rate, duration, warmup=2):
    """A plan of one path: a warm-up, then one measured phase (plan.py's shape)."""
    phase = lambda name, rnd, start, dur: {  # noqa: E731
        "name": name, "workload": "ping", "path": "tcp", "round": rnd, "phase": "warmup" if rnd == 0 else "measure",
        "endpoint": "/", "start_offset_s": start, "duration_s": dur, "url": url, "progress": name}
    doc = {"testid": "bench", "urls": {"tcp": url}, "gap_s": 1, "idle": None, "describe": f"{rate} req/s",
           "settings": {"mode": "rate", "generator": "openloop", "rate": rate, "seed": 1, "paths": ["tcp"]},
           "phases": [phase("ping__tcp__r0", 0, 0, warmup), phase("ping__tcp__r1", 1, warmup + 1, duration)]}
    p = Path(dir_) / f"plan-{rate}.json"
    p.write_text(json.dumps(doc))
    return p


def run_openloop(binary, core, plan_file):
    env = {"PLAN": str(plan_file), "OPENLOOP_METRICS_ADDR": "off", "GOMAXPROCS": "1"}
    subprocess.run(["taskset", "-c", str(core), str(binary)], env=env, check=False, capture_output=True)
    load = json.loads(Path(str(plan_file).replace("plan-", "load-")).read_text())
    return load["phases"][-1]


def run_oha(oha, core, url, rate, duration):
    out = subprocess.run(["taskset", "-c", str(core), oha, "--no-tui", "--output-format", "json", "-q", str(rate),
                          "-z", f"{duration}s", url], capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    pct = doc["latencyPercentiles"]
    return {"p50_ms": pct["p50"] * 1000, "p99_ms": pct["p99"] * 1000, "rps": doc["summary"]["requestsPerSec"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="1000,5000,10000,20000,30000,40000")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--core", type=int, default=1, help="the generator's core")
    ap.add_argument("--nginx-core", type=int, default=0)
    ap.add_argument("--oha", default=shutil.which("oha"))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-openloop-"))
    binary = work / "openloop"
    subprocess.run(["go", "build", "-o", str(binary), "."], cwd=HERE / "openloop", check=True)
    port = free_port()
    (work / "nginx.conf").write_text(NGINX_CONF.format(dir=work, port=port))
    nginx = subprocess.Popen(["taskset", "-c", str(args.nginx_core), "nginx", "-c", str(work / "nginx.conf"),
                              "-g", "daemon off;"])
    url = f"http://127.0.0.1:{port}/"
    try:
        time.sleep(0.5)
        print(f"openloop on core {args.core} (GOMAXPROCS=1), nginx 1 worker on core {args.nginx_core}, "
              f"{args.duration} s a rate, {time.strftime('%Y-%m-%d %H:%M')}\n")
        print("| rate (req/s) | held | late (> 1 ms) | dropped | p50 from send | p99 from send | p50 from due | p99 from due |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for rate in (int(r) for r in args.rates.split(",")):
            ph = run_openloop(binary, args.core, plan(work, url, rate, args.duration))
            d, s = ph["duration_ms"], ph["scheduled_ms"]
            print(f"| {rate:,} | {ph['requests'] / ph['duration_s']:,.0f} | {ph['late_rate']:.2%} | "
                  f"{ph['dropped_iterations']} | {d.get('p50', 0) * 1000:.0f} µs | {d.get('p99', 0) * 1000:.0f} µs | "
                  f"{s.get('p50', 0) * 1000:.0f} µs | {s.get('p99', 0) * 1000:.0f} µs |", flush=True)
        if args.oha:
            print("\n| rate (req/s) | openloop p50 | openloop p99 | oha p50 | oha p99 |")
            print("| ---: | ---: | ---: | ---: | ---: |")
            for rate in (500, 2000):
                ph = run_openloop(binary, args.core, plan(work, url, rate, args.duration))
                o = run_oha(args.oha, args.core, url, rate, args.duration)
                d = ph["duration_ms"]
                print(f"| {rate:,} | {d['p50'] * 1000:.0f} µs | {d['p99'] * 1000:.0f} µs | {o['p50_ms'] * 1000:.0f} µs | "
                      f"{o['p99_ms'] * 1000:.0f} µs |", flush=True)
    finally:
        nginx.terminate()
        nginx.wait()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
