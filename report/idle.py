"""The host's background (pure but for the query function): its context
switches per second in the run's idle phase (IDLE), which each phase's host
figure has subtracted."""
import math

from report.queries import missing_reason
from report.values import matrix_samples


def idle_window(load):
    """(start, end) of the run's idle phase in epoch seconds, or None when
    load.json has none (IDLE=0, or a run from before IDLE) or no start time."""
    idle, start_ms = load.get("idle"), load.get("start_ms")
    if not idle or start_ms is None:
        return None
    start = start_ms / 1000.0 + idle["start_offset_s"]
    return start, start + idle["duration_s"]


def series_rate(series):
    """A counter's per-second rate from the samples of each series (resets
    counted as increase() counts them), summed over the series that have two
    samples or more; (rate, samples of the best-sampled series) or (None, n)."""
    total, used, most = 0.0, 0, 0
    for samples in series:
        pts = sorted((t, v) for t, v in samples if v is not None)
        most = max(most, len(pts))
        if len(pts) < 2:
            continue
        delta = sum(v2 - v1 if v2 >= v1 else v2 for (_, v1), (_, v2) in zip(pts, pts[1:]))
        total += delta / (pts[-1][0] - pts[0][0])
        used += 1
    return (total if used else None), most


def idle_baseline(load, query, where="compose"):
    """The host's context switches per second with no requests, measured in the
    run's idle phase from node-exporter's samples inside it (at least two):
    the background that each phase's host figure has subtracted. Returns
    {window, duration_s, samples, host_ctx_switches_per_s, missing}: missing says
    why the rate is None."""
    out = {"window": None, "duration_s": None, "samples": 0, "host_ctx_switches_per_s": None, "missing": None}
    window = idle_window(load)
    if window is None:
        if load.get("start_ms") is None:
            out["missing"] = "load.json has no start time"
        elif "idle" not in load:
            out["missing"] = "load.json has no idle phase (a run from before IDLE): no background to subtract"
        else:
            out["missing"] = "the run had no idle phase (IDLE=0): no background to subtract"
        return out
    start, end = window
    out["window"] = {"start_s": round(start, 3), "end_s": round(end, 3)}
    out["duration_s"] = end - start
    span = int(math.ceil(end - start))
    rate, n = series_rate(matrix_samples(query(f"node_context_switches_total[{span}s] @ {end:.3f}")))
    out["samples"] = n
    if rate is None:
        out["missing"] = (f"the idle phase ({end - start:g} s) held {n} node-exporter sample(s), two are needed: "
                          "set IDLE >= 10 (Prometheus scrapes every 5 s)") if n else \
            "in the idle phase: " + missing_reason(query, "ctx_switches", "no series", window, {}, where)
        return out
    out["host_ctx_switches_per_s"] = rate
    return out
