#!/usr/bin/env python3
"""Benchmark, not a test: the lab's generator (loadgen/openloop) beside oha,
vegeta and wrk, in one run, on one core.

On this machine, no Docker: Debian's nginx, one worker pinned to one core,
answers 200 on 127.0.0.1 (return 200, no upstream). Each generator in turn,
pinned to the other core (taskset), sends one path at each fixed rate:
openloop (GOMAXPROCS=1, a plan of a warm-up and one measured phase), oha
(-q, no latency correction, one worker thread) and vegeta (attack -rate,
GOMAXPROCS=1, at most 1,000 workers as openloop has 1,000 connections), the
three back to back at each rate so that they share the machine's minutes,
each against a fresh nginx. For each it gives the share of requests sent over 1 ms
late (openloop: its late_rate, with its overflow; oha and vegeta: their
i-th start against origin + i/rate, the origin as early as their sends
allow, with the requests never sent counted late), the rate held, and the median and p99 from the
send. The highest rate with under 1% late is what each holds on one core.
Then wrk flat out (closed loop, 1 thread, --wrk-connections) on that core:
the ceiling of one core's HTTP/1.1 work against this nginx. Then the
latency each adds, at --latency-rates (500 and 2,000 req/s).

    python3 loadgen/bench_openloop.py [--rates 5000,10000,...] [--duration 10]
        [--repeat 1] [--core 1] [--nginx-core 0] [--nice 0]
        [--oha PATH] [--vegeta PATH] [--wrk PATH] [--only openloop,oha,...]
Needs nginx, taskset and go on PATH; oha and vegeta from
scripts/test-deps.sh (oha, vegeta), wrk from Debian. A peer not found is
left out, said so. Prints Markdown tables for docs/results.md.
"""
import argparse
import csv
import io
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("UDS_LAB_CACHE", Path.home() / ".cache" / "uds-lab")) / "bin"
LATE_S = 0.001  # openloop's lateAfter
MAX_IN_FLIGHT = 1000  # openloop's OPENLOOP_CONNECTIONS default; vegeta's -max-workers (else unbounded)

NGINX_CONF = """
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 4096; }}
worker_rlimit_nofile 8192;
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


def quantile(xs, q):
    """The q-quantile of sorted xs (nearest rank), None where empty."""
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def figures(rate, duration, starts, durations):
    """A peer's figures from each request's start (s from its first due time)
    and duration (s): the share late (the i-th start over 1 ms behind
    origin + i/rate, or never sent), the rate held, the median and p99."""
    due = int(rate * duration)
    starts = sorted(starts)[:due]
    # The peer's own origin: its schedule as early as its sends allow (none
    # goes out before its due time), so that a lag of its clock is not late.
    origin = min((s - i / rate for i, s in enumerate(starts)), default=0)
    late = sum(1 for i, s in enumerate(starts) if s - origin - i / rate > LATE_S) + max(0, due - len(starts))
    d = sorted(durations)
    return {"late": late / due, "held": min(len(starts), due) / duration, "p50_us": quantile(d, 0.5) * 1e6 if d else 0,
            "p99_us": quantile(d, 0.99) * 1e6 if d else 0, "dropped": max(0, due - len(starts))}


def prefix(core, nice):
    return (["nice", "-n", str(nice)] if nice else []) + ["taskset", "-c", str(core)]


def run_openloop(binary, core, nice, work, url, rate, duration):
    env = {"PLAN": str(plan(work, url, rate, duration)), "OPENLOOP_METRICS_ADDR": "off", "GOMAXPROCS": "1",
           "PATH": os.environ.get("PATH", "")}
    subprocess.run([*prefix(core, nice), str(binary)], env=env, check=False, capture_output=True, timeout=duration + 120)
    ph = json.loads((Path(work) / f"load-{rate}.json").read_text())["phases"][-1]
    due = ph["requests"] + ph["dropped_iterations"]
    d = ph["duration_ms"]
    return {"late": (ph["late_rate"] * ph["requests"] + ph["dropped_iterations"]) / due,
            "held": ph["requests"] / ph["duration_s"], "p50_us": d.get("p50", 0) * 1000,
            "p99_us": d.get("p99", 0) * 1000, "dropped": ph["dropped_iterations"],
            "queue_p50_us": ph.get("queue_ms", {}).get("p50", 0) * 1000}


def run_oha(oha, core, nice, url, rate, duration, warmup=2):
    """oha -q rate for warmup + duration s; the requests due in the warm-up left out."""
    out = subprocess.run([*prefix(core, nice), oha, "--no-tui", "--output-format", "csv", "--worker-threads", "1",
                          "-q", str(rate), "-z", f"{warmup + duration}s", url],
                         capture_output=True, text=True, check=True, timeout=warmup + duration + 120).stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    rows = [(float(r["request-start"]), float(r["request-duration"])) for r in rows if r["status"] == "200"]
    kept = [(s - warmup, d) for s, d in rows if s >= warmup - 0.5 / rate]
    return figures(rate, duration, [s for s, _ in kept], [d for _, d in kept])


def run_vegeta(vegeta, core, nice, work, url, rate, duration, warmup=2):
    """vegeta attack at rate for warmup + duration s; the warm-up's requests (by seq) left out."""
    results = Path(work) / "vegeta.bin"
    env = {**os.environ, "GOMAXPROCS": "1"}
    with results.open("wb") as f:
        subprocess.run([*prefix(core, nice), vegeta, "attack", f"-rate={rate}/s", f"-duration={warmup + duration}s",
                        "-timeout=30s", f"-max-workers={MAX_IN_FLIGHT}"], input=f"GET {url}\n".encode(), stdout=f, env=env, check=True,
                       timeout=warmup + duration + 120)
    out = subprocess.run([vegeta, "encode", "--to", "csv", str(results)], capture_output=True, text=True,
                         check=True).stdout
    rows = [(int(r[8]), int(r[0]), int(r[2]), r[1]) for r in csv.reader(io.StringIO(out))]
    if not rows:
        return figures(rate, duration, [], [])
    t0 = min(t for _, t, _, _ in rows)  # figures() finds vegeta's own origin
    first = int(warmup * rate)
    kept = [((t - t0) / 1e9, lat / 1e9) for seq, t, lat, code in rows if seq >= first and code == "200"]
    return figures(rate, duration, [s for s, _ in kept], [d for _, d in kept])


def run_wrk(wrk, core, nice, url, duration, connections):
    out = subprocess.run([*prefix(core, nice), wrk, "-t1", f"-c{connections}", f"-d{duration}s", "--latency", url],
                         capture_output=True, text=True, check=True, timeout=duration + 60).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    return float(m.group(1)) if m else 0.0


def fmt_us(v):
    return f"{v:,.0f} µs"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="5000,10000,15000,20000,25000,30000")
    ap.add_argument("--latency-rates", default="500,2000")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each generator at each rate (figures: each, then the median)")
    ap.add_argument("--core", type=int, default=1, help="the generators' core")
    ap.add_argument("--nginx-core", type=int, default=0)
    ap.add_argument("--nice", type=int, default=0, help="nice(1) for nginx and every generator (e.g. -10 on a shared machine)")
    ap.add_argument("--oha", default=shutil.which("oha") or next(iter(sorted(CACHE.glob("oha-*"))), None))
    ap.add_argument("--vegeta", default=shutil.which("vegeta") or next(iter(sorted(CACHE.glob("vegeta-*"))), None))
    ap.add_argument("--wrk", default=shutil.which("wrk"))
    ap.add_argument("--wrk-connections", type=int, default=64)
    ap.add_argument("--only", default="openloop,oha,vegeta,wrk", help="which generators")
    return ap.parse_args(argv)


class Bench:
    """One benchmark run: its settings, its folder (openloop built there) and the generators it runs."""

    def __init__(self, args):
        self.args = args
        self.only = set(args.only.split(","))
        for name in ("oha", "vegeta", "wrk"):
            if name in self.only and not getattr(args, name):
                print(f"{name}: not found (scripts/test-deps.sh {name}, or --{name} PATH): left out", file=sys.stderr)
                self.only.discard(name)
        self.work = Path(tempfile.mkdtemp(prefix="bench-openloop-"))
        self.binary = self.work / "openloop"
        subprocess.run(["go", "build", "-o", str(self.binary), "."], cwd=HERE / "openloop", check=True)
        self.gens = [g for g in ("openloop", "oha", "vegeta") if g in self.only]

    def nginx(self):
        """A fresh nginx for each run: no generator meets another's connections or backlog."""
        port = free_port()
        (self.work / "nginx.conf").write_text(NGINX_CONF.format(dir=self.work, port=port))
        proc = subprocess.Popen([*prefix(self.args.nginx_core, self.args.nice), "nginx", "-c",
                                 str(self.work / "nginx.conf"), "-g", "daemon off;"])
        time.sleep(0.3)
        return proc, f"http://127.0.0.1:{port}/"

    def once(self, gen, rate):
        a = self.args
        proc, url = self.nginx()
        try:
            if gen == "openloop":
                return run_openloop(self.binary, a.core, a.nice, self.work, url, rate, a.duration)
            if gen == "oha":
                return run_oha(a.oha, a.core, a.nice, url, rate, a.duration)
            return run_vegeta(a.vegeta, a.core, a.nice, self.work, url, rate, a.duration)
        finally:
            stop(proc)

    def table(self, rates, what):
        """Each generator at each rate, a row a run; then their medians, a row a generator."""
        if not rates:
            return
        runs = {}
        for rate in rates:
            for k in range(self.args.repeat):
                for gen in self.gens:
                    r = self.once(gen, rate)
                    runs.setdefault((gen, rate), []).append(r)
                    print(f"| {gen} | {rate:,} | {k + 1} | {r['held']:,.0f} | {r['late']:.2%} | {r['dropped']:,} | "
                          f"{fmt_us(r['p50_us'])} | {fmt_us(r['p99_us'])} |", flush=True)
        print(f"\n{what}, the median of {self.args.repeat} run(s):\n")
        print("| generator | " + " | ".join(f"{r:,} req/s: late, p50, p99" for r in rates)
              + " | on time (< 1% late) | sent (>= 99% of the rate) |")
        print("| --- | " + " | ".join("---:" for _ in rates) + " | ---: | ---: |")
        for gen in self.gens:
            print(median_row(gen, rates, runs), flush=True)

    def wrk(self):
        """wrk flat out, --repeat times: one core's HTTP/1.1 ceiling against this nginx."""
        a, rps = self.args, []
        for _ in range(a.repeat):
            proc, url = self.nginx()
            try:
                rps.append(run_wrk(a.wrk, a.core, a.nice, url, a.duration, a.wrk_connections))
            finally:
                stop(proc)
        print(f"\nwrk flat out (1 thread, {a.wrk_connections} connections, {a.duration} s): "
              + ", ".join(f"{r:,.0f}" for r in rps) + " req/s")


def stop(proc):
    proc.terminate()
    proc.wait(timeout=30)


def median_row(gen, rates, runs):
    """A generator's medians at each rate, the highest rate it held on time and the highest it sent."""
    cells, on_time, sent = [], 0, 0
    for rate in rates:
        rs = runs[(gen, rate)]
        late = statistics.median(r["late"] for r in rs)
        cells.append(f"{late:.2%}, {fmt_us(statistics.median(r['p50_us'] for r in rs))}, "
                     f"{fmt_us(statistics.median(r['p99_us'] for r in rs))}")
        on_time = max(on_time, rate) if late < 0.01 else on_time
        sent = max(sent, rate) if statistics.median(r["held"] for r in rs) >= 0.99 * rate else sent
    return f"| {gen} | " + " | ".join(cells) + f" | {on_time:,} | {sent:,} |"


def main():
    args = parse_args()
    b = Bench(args)
    try:
        load = os.getloadavg()
        print(f"{time.strftime('%Y-%m-%d %H:%M %Z')}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
              f"{os.cpu_count()} cores; generators on core {args.core}, nginx (1 worker) on core {args.nginx_core}, "
              f"nice {args.nice}; {args.duration} s a run after a 2 s warm-up; {args.repeat} run(s) each\n")
        print("| generator | rate (req/s) | run | held | late (> 1 ms) | not sent | p50 from send | p99 from send |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        b.table([int(r) for r in args.rates.split(",") if r], "The rates")
        print()
        b.table([int(r) for r in args.latency_rates.split(",") if r], "The latency each adds")
        if "wrk" in b.only:
            b.wrk()
        load = os.getloadavg()
        print(f"\nended {time.strftime('%H:%M')}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    finally:
        shutil.rmtree(b.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
