#!/usr/bin/env python3
"""One load.json from the load.json of each k6 pod of a Kubernetes run
(scripts/k8s.sh load): the pods ran the same plan, each its execution
segment of it (k6 --execution-segment), so their phases are the same phases
at the same times, each with its share of the requests.

Counts add up (requests, failures, dropped iterations, statuses, a block's
requests), and a mean and a maximum merge exactly. A quantile does not: k6
keeps no histogram in its summary, so a merged quantile (a block's median
included) is the request-weighted mean of the pods' own quantiles, not the
quantile of their pooled requests. The output says so in "segments", and the
report names it. Each pair of a block is still measured at the same instant
in every pod, so the answer stays paired in time.

    merge_segments.py OUT IN...   (exit 2, naming the file, when they differ)
"""
import json
import sys


class MergeError(Exception):
    pass


def weighted(values, weights):
    """The weighted mean of the values that exist (None: none exists)."""
    pairs = [(v, w) for v, w in zip(values, weights) if v is not None and w]
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total else None


def durations(ds, counts):
    """Merged request durations: max exact, the mean exact, quantiles weighted."""
    keys = {k for d in ds for k in d}
    out = {}
    for k in sorted(keys):
        vals = [d.get(k) for d in ds]
        if k == "max":
            out[k] = max(v for v in vals if v is not None)
        else:
            v = weighted(vals, counts)
            if v is not None:
                out[k] = v
    return out


def merge_counts(items, key="requests"):
    """Merged phase (or path) figures: counts summed, rates and durations weighted."""
    counts = [it.get(key, 0) for it in items]
    out = dict(items[0])
    out[key] = sum(counts)
    out["failed_rate"] = weighted([it.get("failed_rate", 0) for it in items], counts) or 0
    if "dropped_iterations" in out:
        out["dropped_iterations"] = sum(it.get("dropped_iterations", 0) for it in items)
    if "duration_ms" in out:
        out["duration_ms"] = durations([it.get("duration_ms", {}) for it in items], counts)
    if "statuses" in out:
        out["statuses"] = {k: sum(it["statuses"].get(k, 0) for it in items) for k in out["statuses"]}
    return out


def merge_phase(phases):
    out = merge_counts(phases)
    if "by_path" in out:
        by_path = {}
        for p in out["by_path"]:
            per = [ph["by_path"][p] for ph in phases]
            m = merge_counts(per)
            m["blocks"] = [
                {"requests": sum(b["requests"] for b in bs),
                 "p50": weighted([b["p50"] for b in bs], [b["requests"] for b in bs])}
                for bs in zip(*(q["blocks"] for q in per))
            ]
            by_path[p] = m
        out["by_path"] = by_path
    return out


def merge(docs, names):
    first = docs[0]
    for doc, name in zip(docs[1:], names[1:]):
        for key in ("testid", "settings", "urls"):
            if doc.get(key) != first.get(key):
                raise MergeError(f"{name}: its {key} differs from {names[0]}'s: not segments of one run")
        if [p["name"] for p in doc["phases"]] != [p["name"] for p in first["phases"]]:
            raise MergeError(f"{name}: its phases differ from {names[0]}'s: not segments of one run")
    out = dict(first)
    starts = [d["start_ms"] for d in docs if d.get("start_ms") is not None]
    out["start_ms"] = min(starts) if starts else None
    out["phases"] = [merge_phase(list(ps)) for ps in zip(*(d["phases"] for d in docs))]
    out["totals"] = merge_counts([d["totals"] for d in docs])
    out["thresholds_failed"] = sorted({t for d in docs for t in d.get("thresholds_failed", [])})
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
