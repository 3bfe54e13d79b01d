#!/usr/bin/env python3
"""One load.json from the load.json of each openloop pod of a Kubernetes run
(scripts/k8s.sh load): the pods ran the same plan, pod i of n sending every
request of each phase's stream whose index is i modulo n
(OPENLOOP_SEGMENT). Their phases are the same phases at the same times,
each with its share of every block of every path, where the pods' schedules
start at the same instant (OPENLOOP_START_AT, which loadgen/k8s_backend.py
gives them all): pods whose start_ms differ by more than START_SPREAD_MAX_MS are
refused, naming each pod's start, since their seconds are not the same.
The merged start_late_ms is how late after start_ms the last pod began.

The merge is exact: counts add up (requests, failures, late and dropped
requests, statuses; a replay's per route and block), and every duration
figure, a block's median included,
is read from the sum of the pods' HDR histograms (load.json's hdr), which is
the histogram of their pooled requests. A file without histograms (k6's) is
refused, naming it.

    merge_segments.py OUT IN...   (exit 2, naming the file, when they differ)
"""
import json
import sys

from hdrh.histogram import HdrHistogram

# openloop's histograms: microseconds, 3 significant digits (loadgen/openloop/record.go).
LOWEST, DIGITS = 1, 3

# The most the pods' starts (start_ms, their schedules' origin) may differ
# by, in ms: openloop's startLateMax (loadgen/openloop/start.go), the most a
# pod may come up after the run's start instant.
START_SPREAD_MAX_MS = 5


class MergeError(Exception):
    pass


def added(encoded):
    """The sum of HDR histograms (HdrHistogram's compressed base64)."""
    hists = [HdrHistogram.decode(e) for e in encoded]
    out = HdrHistogram(LOWEST, max(h.highest_trackable_value for h in hists), DIGITS)
    for h in hists:
        out.add(h)
    return out


def durations(h):
    """load.json's quantiles (ms) of a histogram of µs, as openloop writes them."""
    if h.get_total_count() == 0:
        return {}
    ms = {f"p{k}": h.get_value_at_percentile(q) / 1000
          for k, q in (("50", 50), ("90", 90), ("95", 95), ("99", 99), ("999", 99.9))}
    return {"avg": h.get_mean_value() / 1000, **ms, "max": h.get_max_value() / 1000}


def count(items, share, key="requests"):
    """A count the items give as a share of their requests, summed."""
    return sum(round(it.get(share, 0) * it.get(key, 0)) for it in items)


def merge_figures(items):
    """Merged phase (or path) figures: counts summed, durations from the summed histograms."""
    out = dict(items[0])
    out["requests"] = sum(it["requests"] for it in items)
    for share in ("failed_rate", "late_rate"):
        if share in out:
            out[share] = count(items, share) / out["requests"] if out["requests"] else 0
    for key in ("dropped_iterations", "connections_opened"):
        if key in out:
            out[key] = sum(it.get(key, 0) for it in items)
    if "statuses" in out:
        out["statuses"] = {k: sum(it["statuses"].get(k, 0) for it in items) for k in out["statuses"]}
    if "hdr" in out:
        out["hdr"] = {}
        for key, figure in HDR_FIGURES.items():
            if key in items[0]["hdr"]:
                h = added([it["hdr"][key] for it in items])
                out[figure], out["hdr"][key] = durations(h), h.encode().decode()
    return out


# A phase's (or path's) histograms (hdr) and the quantiles read from each:
# from the actual send, from the due time, the generator's queue (due to
# written) and written to the first byte (openloop's summary.go, figures).
HDR_FIGURES = {"sent": "duration_ms", "due": "scheduled_ms", "queue": "queue_ms", "first_byte": "first_byte_ms"}


def merge_block(blocks):
    h = added([b["hdr"] for b in blocks])
    some = h.get_total_count() > 0
    return {"requests": sum(b["requests"] for b in blocks), "failed": sum(b["failed"] for b in blocks),
            "p50": h.get_value_at_percentile(50) / 1000 if some else None,
            "p99": h.get_value_at_percentile(99) / 1000 if some else None,
            "mean": h.get_mean_value() / 1000 if some else None, "hdr": h.encode().decode()}


def merge_route(routes):
    """One route of a replay (by_route): per path, counts summed, durations
    from the summed histograms, each block's number and sum summed (a path
    only some pods sent the route on: theirs)."""
    by_path = {}
    for p in sorted({p for r in routes for p in r["by_path"]}):
        per = [r["by_path"][p] for r in routes if p in r["by_path"]]
        h, requests = added([v["hdr"] for v in per]), sum(v["requests"] for v in per)
        by_path[p] = {"requests": requests, "failed_rate": count(per, "failed_rate") / requests if requests else 0,
                      "duration_ms": durations(h), "hdr": h.encode().decode(),
                      "blocks": {k: [sum(x) for x in zip(*(v["blocks"][k] for v in per))] for k in ("n", "sum_ms")}}
    return {"route": routes[0]["route"], "by_path": by_path}


def merge_phase(phases):
    out = merge_figures(phases)
    if "by_path" in out:
        by_path = {}
        for p in out["by_path"]:
            per = [ph["by_path"][p] for ph in phases]
            m = merge_figures(per)
            m["blocks"] = [merge_block(bs) for bs in zip(*(q["blocks"] for q in per))]
            by_path[p] = m
        out["by_path"] = by_path
    if "by_route" in out:
        out["by_route"] = [merge_route(list(rs)) for rs in zip(*(ph["by_route"] for ph in phases))]
    return out


# openloop's threshold on a phase whose load did not go out (thresholds_failed's
# "dropped_iterations:<phase>"): more than 1% of its requests due dropped, not sent.
DROPPED = "dropped_iterations"


def over_dropped(phase, docs):
    """Whether the merged phase fails openloop's dropped threshold. Its share
    of drops is the pods' weighted mean: over 1% only where some pod's is, so
    only an openloop that names such phases gives a merge that does."""
    named = any(f"{DROPPED}:{phase['name']}" in d.get("thresholds_failed", []) for d in docs)
    due = phase.get("requests", 0) + phase.get("dropped_iterations", 0)
    return named and due > 0 and phase.get("dropped_iterations", 0) / due > 0.01


def check(docs, names):
    first = docs[0]
    for doc, name in zip(docs, names):
        if any("hdr" not in p for p in doc["phases"]):
            raise MergeError(f"{name}: no histograms (hdr): not openloop's, cannot be merged exactly")
        for key in ("testid", "settings", "urls"):
            if doc.get(key) != first.get(key):
                raise MergeError(f"{name}: its {key} differs from {names[0]}'s: not segments of one run")
        if [p["name"] for p in doc["phases"]] != [p["name"] for p in first["phases"]]:
            raise MergeError(f"{name}: its phases differ from {names[0]}'s: not segments of one run")
    starts = [d.get("start_ms") for d in docs]
    known = [s for s in starts if s is not None]
    if not known:
        return
    said = ", ".join(f"{n} {s}" for n, s in zip(names, starts))
    if len(known) < len(starts):
        raise MergeError(f"some pods' schedules start at no known time (start_ms, unix ms: {said}): "
                         "their seconds cannot be paired")
    if max(known) - min(known) > START_SPREAD_MAX_MS:
        raise MergeError(f"the pods' schedules start {max(known) - min(known)} ms apart, more than the "
                         f"{START_SPREAD_MAX_MS} ms they may (start_ms, unix ms: {said}): their seconds are not "
                         "the same seconds. Every pod must be given the run's start instant (OPENLOOP_START_AT, "
                         "which scripts/k8s.sh sets)")


def merge(docs, names):
    check(docs, names)
    out = dict(docs[0])
    starts = [d["start_ms"] for d in docs if d.get("start_ms") is not None]
    out["start_ms"] = min(starts) if starts else None
    began = [d["start_ms"] + d["start_late_ms"] for d in docs if "start_late_ms" in d and d.get("start_ms") is not None]
    if began:
        # How late after start_ms the last pod began (the pods' wake-up at the instant).
        out["start_late_ms"] = round(max(began) - out["start_ms"], 3)
    out["phases"] = [merge_phase(list(ps)) for ps in zip(*(d["phases"] for d in docs))]
    requests = sum(d["totals"]["requests"] for d in docs)
    failed = count([d["totals"] for d in docs], "failed_rate")
    out["totals"] = {"requests": requests, "failed_rate": failed / requests if requests else 0}
    out["thresholds_failed"] = (["http_req_failed"] if out["totals"]["failed_rate"] > 0.01 else []) + [
        f"{DROPPED}:{p['name']}" for p in out["phases"] if over_dropped(p, docs)]
    out["segments"] = {
        "pods": len(docs),
        "requests": [d["totals"]["requests"] for d in docs],
        "start_spread_ms": (max(starts) - min(starts)) if starts else None,
    }
    return out


def main(argv):
    if len(argv) < 3:
        print("usage: merge_segments.py OUT IN...", file=sys.stderr)
        return 2
    docs = []
    for name in argv[2:]:
        try:
            with open(name, encoding="utf-8") as f:
                docs.append(json.load(f))
        except (OSError, ValueError) as e:
            print(f"merge_segments.py: {name}: {e}", file=sys.stderr)
            return 2
    try:
        out = merge(docs, argv[2:])
    except (MergeError, KeyError) as e:
        print(f"merge_segments.py: {e}", file=sys.stderr)
        return 2
    with open(argv[1], "w", encoding="utf-8") as f:
        json.dump(out, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
