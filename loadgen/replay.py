"""Your traffic, replayed: the requests of an access log (loadgen/traffic.py
reads it) as the schedule openloop sends through every path (make load
TRAFFIC=...).

Each logged GET or HEAD of the selection is one cycle of the interleaved
stream: it is sent once to each path of the stream, in the cycle's order
(openloop draws it from the run's seed, as for any interleaved stream), so
every path sees the same requests at the same instants.

When. TRAFFIC_SPEED=<x> (default 1): at the log's own times divided by x. A
request's time is when it arrived: the logged time (nginx writes it as the
response ends) less its $request_time where the log has one. Requests that
share a time (combined's whole seconds) are spread evenly over the time to
the next one, the last over the log's time resolution. TRAFFIC_SPEED=rate:
at RATE requests/s of the stream, the log's order kept. Within a cycle the
paths' requests are spaced evenly over the cycle's time.

What. TRAFFIC_SEND=emulate (the default): each request becomes the lab's
app's GET /replay/<bytes>/<us> (services/app), which waits the logged
upstream time and sends the logged body bytes (0 us where the log has no
upstream time; a HEAD sends 0 bytes; above the app's caps, 16 MiB and 10 s,
the caps, counted). TRAFFIC_SEND=logged: sent to your app as logged, its
method (GET or HEAD) and its path (the query string only with
TRAFFIC_QUERY=keep).

The schedule file (plan.py's REPLAY_FILE, beside the plan), a line per cycle in send
order: due_us, spacing_us (between the cycle's paths), method (GET or HEAD),
route (an index into the plan's routes: the TOP_ROUTES most requested, folded
as traffic.route() folds them, then "other"), target. With
TRAFFIC_SEND=logged the targets are your paths: loadgen/drive.py deletes the
file when the run ends (nothing of a path but its folded route stays in
results/). The plan keeps the summary (replay()'s dict), never a path.
"""
import math
import os
import re
from array import array
from collections import Counter

import numpy as np

import traffic

SENDS = ("emulate", "logged")
OTHER = "other"
# services/app's caps of GET /replay/:bytes/:us (maxBytes, maxSleepMS).
APP_MAX_BYTES = 16 << 20
APP_MAX_US = 10_000_000
HEADER = "# uds-lab replay: due_us spacing_us method route target"


def read_speed(env):
    """TRAFFIC_SPEED: a factor over 0 (the log's times divided by it), or None for "rate"."""
    raw = (env.get("TRAFFIC_SPEED") or "1").strip()
    if raw == "rate":
        return None
    if not re.fullmatch(r"[0-9]+(?:\.[0-9]+)?", raw) or float(raw) <= 0:
        raise traffic.TrafficError(f'TRAFFIC_SPEED="{raw}": must be a number above 0 (1: the log\'s own times) '
                                   "or rate (at RATE, in the log's order)")
    return float(raw)


def read_send(env):
    raw = (env.get("TRAFFIC_SEND") or "emulate").strip()
    if raw not in SENDS:
        raise traffic.TrafficError(f'TRAFFIC_SEND="{raw}": must be one of {", ".join(SENDS)}')
    return raw


def emulated(req):
    """(body bytes, upstream µs, capped): what the app's /replay route is asked for a logged request."""
    body = 0 if req.method == "HEAD" else req.bytes
    us = round(req.upstream_time * 1e6) if req.upstream_time is not None else 0
    return min(body, APP_MAX_BYTES), min(us, APP_MAX_US), body > APP_MAX_BYTES or us > APP_MAX_US


class Targets:
    """The requests' targets in log order: emulated, two numbers each (a
    million lines in 16 MB, not a million strings); logged, the paths."""

    def __init__(self, send):
        self.send, self.paths, self.body, self.us = send, [], array("q"), array("q")

    def add(self, req, counts):
        if self.send == "logged":
            self.paths.append(req.path)
            return
        body, us, capped = emulated(req)
        self.body.append(body)
        self.us.append(us)
        counts["capped"] += capped
        counts["no_upstream_time"] += req.upstream_time is None

    def __getitem__(self, i):
        return self.paths[i] if self.send == "logged" else f"/replay/{self.body[i]}/{self.us[i]}"


def not_replayed(req, send):
    """Why a logged request is left out, or None: a method other than GET and
    HEAD changes state; sent as logged, a request the log says failed (a
    status outside 200-399) would fail again and be counted as the path's
    failure (the emulation answers it with its bytes and time)."""
    if not traffic.replayable(req):
        return req.method or "(no request line)"
    if send == "logged" and not 200 <= req.status < 400:
        return f"{req.method} logged {req.status // 100}xx"
    return None


def collect(files, settings, send):
    """One pass over the log: the replayable requests' arrivals, methods,
    route ids and targets, with the counts the plan says."""
    tallies, skipped, route_ids = [], Counter(), {}
    arrivals, heads, rids, targets = array("d"), bytearray(), array("l"), Targets(send)
    counts = Counter()
    for req in traffic.read(files, settings, tallies):
        why = not_replayed(req, send)
        if why:
            skipped[why] += 1
            continue
        arrivals.append(req.time - (req.request_time or 0.0))
        heads.append(req.method == "HEAD")
        rids.append(route_ids.setdefault(traffic.route(req.path), len(route_ids)))
        targets.add(req, counts)
    return tallies, skipped, route_ids, arrivals, heads, rids, targets, counts


def due_times(arrivals, order, resolution, speed, rate, n_paths):
    """(due, spacing) in seconds of each cycle in send order."""
    cycles = len(order)
    if speed is None:
        step = n_paths / rate
        return np.arange(cycles) * step, np.full(cycles, 1 / rate)
    a = np.asarray(arrivals)[order]
    a = a - a[0]
    # Ties spread over the gap to the next distinct time (the last: the resolution).
    values, first, counts = np.unique(a, return_index=True, return_counts=True)
    gaps = np.append(np.diff(values), max(resolution, 1e-3))
    group = np.repeat(np.arange(len(values)), counts)
    within = np.arange(cycles) - first[group]
    due = (a + within * gaps[group] / counts[group]) / speed
    nxt = np.append(due[1:], due[-1] + max(resolution, 1e-3) / speed / counts[-1])
    return due, (nxt - due) / n_paths


def replay(files, settings, send, speed, rate, n_paths, out_path):
    """Write the schedule file; the summary the plan keeps (counts, routes,
    seconds: nothing of a line but its folded route)."""
    tallies, skipped, route_ids, arrivals, heads, rids, targets, counts = collect(files, settings, send)
    cycles = len(arrivals)
    if not cycles:
        raise traffic.TrafficError(f"{', '.join(map(str, files))}: no GET or HEAD request in the selection: "
                                   "nothing to replay")
    by_route = Counter(rids)
    names = {i: r for r, i in route_ids.items()}
    top = [i for i, _ in by_route.most_common(traffic.TOP_ROUTES)]
    label = {i: k for k, i in enumerate(top)}
    other = len(top)
    order = np.argsort(np.asarray(arrivals), kind="stable")
    resolution = max((t.resolution for t in tallies), default=0.0)
    due, spacing = due_times(arrivals, order, resolution, speed, rate, n_paths)
    with open(out_path, "w", encoding="ascii", newline="\n") as f:
        f.write(HEADER + "\n")
        for k, i in enumerate(order):
            f.write(f"{round(due[k] * 1e6)}\t{max(1, round(spacing[k] * 1e6))}\t{'HEAD' if heads[i] else 'GET'}\t"
                    f"{label.get(rids[i], other)}\t{targets[i]}\n")
    os.chmod(out_path, 0o600 if send == "logged" else 0o644)
    duration = float(due[-1] + spacing[-1] * n_paths)
    return {
        "file": os.path.basename(out_path), "send": send, "speed": speed if speed is not None else "rate",
        "cycles": cycles, "requests": cycles * n_paths, "paths": n_paths,
        "duration_s": duration, "mean_rate": cycles * n_paths / duration if duration else 0.0,
        "peak_rate": peak_rate(due, n_paths),
        "routes": [names[i] for i in top] + ([OTHER] if len(by_route) > len(top) else []),
        "route_counts": [by_route[i] for i in top] + ([cycles - sum(by_route[i] for i in top)]
                                                      if len(by_route) > len(top) else []),
        "distinct_routes": len(by_route),
        "log_lines": sum(t.lines for t in tallies), "unparsable": sum(t.bad_count for t in tallies),
        "first_unparsable_lines": [n for t in tallies for n, _ in t.bad],
        "skipped": dict(skipped.most_common()),
        "time_resolution_s": resolution,
        **({"capped": counts["capped"], "no_upstream_time": counts["no_upstream_time"]} if send == "emulate" else {}),
    }


def peak_rate(due, n_paths, window_s=1.0):
    """The most requests of the stream due in any window_s, per second (cycles x paths)."""
    ends = np.searchsorted(due, due + window_s, side="left")
    return int((ends - np.arange(len(due))).max()) * n_paths / window_s


def describe(r):
    """The replay in words, for the plan's description."""
    how = ("emulated on the lab's app (GET /replay/<bytes>/<us>)" if r["send"] == "emulate"
           else "sent to your app as logged (GET and HEAD)")
    speed = r["speed"]
    when = ("at RATE in the log's order" if speed == "rate"
            else "at the log's own times" + ("" if speed == 1 else f" / {speed:g} (TRAFFIC_SPEED)"))
    skipped = sum(r["skipped"].values())
    sizes = r.get("streams") or [r["paths"]]
    each = f" (streams of {' then '.join(map(str, sizes))})" if len(sizes) > 1 else ""
    out = (f"your traffic: {r['cycles']} logged requests ({r['distinct_routes']} routes) x {r['paths']} paths{each} = "
           f"{r['requests']} requests over {math.ceil(r['duration_s'])} s{' a stream' if each else ''} {when} "
           f"(peak {r['peak_rate']:.0f} req/s), {how}")
    if skipped:
        out += f"; {skipped} not replayed (" + ", ".join(f"{m} {c}" for m, c in r["skipped"].items()) + ")"
    if r.get("capped"):
        out += f"; {r['capped']} above the app's caps (16 MiB, 10 s) sent at the caps"
    return out
