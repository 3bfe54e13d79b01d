"""Your traffic (make load TRAFFIC=): what the socket saved on the replayed
log, from the interleaved stream's blocks, per connection handling: on the
traffic's median (the answer's own comparison, judged there), its p99 and its
mean (the share of the requests' time the socket gives back); then the log's
most requested routes (loadgen/replay.py's, IDs folded), each with its
requests, its median on each path of the pair, and what the socket saved on
the route's mean, paired block by block where its blocks allow (each path
MIN_BLOCK_REQUESTS or more of the route's successful requests in a block).

The p99, the mean and the routes are claims beyond the answer: judged
together, Holm's correction over all of them (their number said), never in
the answer's family; a verdict is the answer's (words.answer_row, at MARGIN).
"""
from report import interleaved
from report.breakdown import failures_of
from report.stats import holm
from report.words import answer_row

# The traffic's figures per block (load.json's blocks: openloop's, in ms), as said.
STATS = {"p50": "median", "p99": "p99", "mean": "mean"}


def block_series(mixed, stat):
    """{path: [the block's stat (ms), or None where it had too few successes]}."""
    return {path: [b.get(stat) if interleaved.timed(b) >= interleaved.MIN_BLOCK_REQUESTS else None
                   for b in v["blocks"]] for path, v in (mixed.get("by_path") or {}).items()}


def route_series(route):
    """{path: [the route's mean (ms) in each block, or None where too few]}."""
    return {path: [s / n if n >= interleaved.MIN_BLOCK_REQUESTS else None
                   for n, s in zip(v["blocks"]["n"], v["blocks"]["sum_ms"])]
            for path, v in route["by_path"].items()}


def pairs(terms, paths):
    """The answer's comparisons whose two paths the run measured: catalogue.json's
    breakdown terms marked answer (a socket path against a TCP path)."""
    return [t for t in terms if t.get("answer") and not t.get("instead_of") and all(p in paths for p in t["paths"])]


def diff(series, t, block_s):
    """What the socket saved (TCP's figure minus the socket's, µs), block by block."""
    return interleaved.block_diff(series, *t["paths"], scale=1e3, block_s=block_s)


def cell(v, d, margin_pct):
    """A verdict in a table cell: the answer's words, shortened (its interval in µs)."""
    ci = f"{round(v['lo']):,} to {round(v['hi']):,} µs" if v.get("lo") is not None else ""
    if v["verdict"] == "differs":
        return f"{v['words']}; {ci}"
    if v["verdict"] == "same":
        return f"no difference > ±{margin_pct:g}%; {ci}"
    if v["verdict"] == "unsure":
        alone = v["lo"] is not None and (v["lo"] > 0 or v["hi"] < 0)  # taken back by the correction
        return f"not sure yet once judged together; {ci} alone" if alone else f"not sure yet; {ci}"
    return "too few requests a block" if d is None else v["words"] or "n/a"


def section(load, mixed, terms, margin_pct):
    """The traffic's section of the report (None where the run replayed no log):
    the replay's summary, per answer comparison its median, p99 and mean cells,
    and the routes' table, each cell a verdict."""
    tr = (load.get("settings") or {}).get("traffic")
    if not tr or mixed is None:
        return None
    chosen = pairs(terms, list(mixed.get("by_path") or {}))
    series = {s: block_series(mixed, s) for s in STATS}
    cells = {(t["key"], s): diff(series[s], t, mixed["block_s"]) for t in chosen for s in STATS}
    routes = mixed.get("by_route") or []
    route_cells = {(i, t["key"]): diff(route_series(r), t, mixed["block_s"])
                   for i, r in enumerate(routes) for t in chosen}
    beyond = [d for (_, s), d in cells.items() if s != "p50"] + list(route_cells.values())
    holm(beyond)
    k = sum(1 for d in beyond if d is not None and d.get("p") is not None)

    # A path failing over 1% of its requests gets no verdict anywhere (the answer's rule).
    failed = failures_of([mixed])

    def verdict(t, d):
        row = answer_row(t, {"figures": {"client_p50_ms": d}}, max(k, 1), margin_pct, None, failed)
        out = {k2: row.get(k2) for k2 in ("verdict", "words", "saved_us", "share", "lo", "hi", "inside_margin")}
        return {**out, "cell": cell(out, d, margin_pct)}

    rows = []
    for t in chosen:
        rows.append({"key": t["key"], "handling": t["answer"], "against": t["against"], "pair": t["paths"][::-1],
                     **{s: verdict(t, cells[(t["key"], s)]) for s in STATS}})
        # The answer's own comparison is judged in the answer (its family): the median cell repeats its words.
        rows[-1]["p50"]["judged"] = "the answer"
    table = []
    for i, r in enumerate(routes):
        by = r["by_path"]
        table.append({"route": r["route"], "requests": tr["route_counts"][i] if i < len(tr["route_counts"]) else None,
                      "median_ms": {p: (v.get("duration_ms") or {}).get("p50") for p, v in by.items()},
                      "saved": {t["key"]: verdict(t, route_cells[(i, t["key"])]) for t in chosen}})
    return {"replay": {k2: tr.get(k2) for k2 in ("send", "speed", "cycles", "requests", "distinct_routes", "skipped",
                                                 "peak_rate", "duration_s", "capped", "no_upstream_time")},
            "comparisons": rows, "routes": table, "judged_together": k,
            "method": f"{interleaved.METHOD}; the p99, mean and route cells judged together (Holm, {k} comparisons)"}


def markdown(sec, margin_pct):
    """The section as the report's lines."""
    if sec is None:
        return []
    r = sec["replay"]
    how = "emulated on the lab's app" if r["send"] == "emulate" else "sent to your app as logged"
    when = "at RATE in the log's order" if r["speed"] == "rate" else (
        "at the log's own times" + ("" if r["speed"] == 1 else f" / {r['speed']:g}"))
    skipped = ", ".join(f"{m} {n}" for m, n in (r.get("skipped") or {}).items())
    out = ["## Your traffic", "",
           f"{r['cycles']:,} logged requests ({r['distinct_routes']:,} routes) sent once to each path of their "
           f"stream, {when}, {how}" + (f"; not replayed: {skipped}" if skipped else "") + ".", "",
           "| connections | the socket against | median | p99 | mean |", "| --- | --- | --- | --- | --- |"]
    for c in sec["comparisons"]:
        out.append(f"| {c['handling']} | {c['against']} (`{c['pair'][0]}` vs `{c['pair'][1]}`) | "
                   + " | ".join(c[s]["cell"] for s in STATS) + " |")
    out += ["", f"What the socket saved on the traffic's median (the answer's comparison), p99 and mean (the mean "
                f"is the share of the requests' time it gives back); {sec['method']}; \"no difference\" within "
                f"±{margin_pct:g}% (MARGIN)."]
    if sec["routes"]:
        cs = sec["comparisons"]
        out += ["", "| route | logged requests | " + " | ".join(f"`{c['pair'][0]}` vs `{c['pair'][1]}`" for c in cs)
                + " |", "| --- | ---: | " + " | ".join("---" for _ in cs) + " |"]
        for t in sec["routes"]:
            med = t["median_ms"]

            def medians(c):
                tcp, sock = med.get(c["pair"][1]), med.get(c["pair"][0])
                return f" (median {tcp:.3f} → {sock:.3f} ms)" if tcp is not None and sock is not None else ""
            out.append(f"| `{t['route']}` | {t['requests'] or 0:,} | "
                       + " | ".join(t["saved"][c["key"]]["cell"] + medians(c) for c in cs) + " |")
        out += ["", "Per route (the log's most requested, IDs folded), what the socket saved on the route's mean, "
                    "paired block by block where each path had "
                    f"{interleaved.MIN_BLOCK_REQUESTS} or more of the route's successful requests in a block; its "
                    "median on TCP and on the socket beside it."]
    return out + [""]
