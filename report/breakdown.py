"""Where the time goes (pure): catalogue.json's breakdown terms, one path's
figure minus another's round by round (less two more, for a difference in
differences), the answer's terms (those the catalogue marks `answer`)
judged together (Holm), and which paths failed too many requests for a
verdict. The verdicts are report/verdicts.py's; their words,
report/words.py's."""
from report import interleaved
from report.lab import CATALOGUE, TERMS, stood_in_for
from report.stats import ANSWER_ALPHA, diff_stats, holm, ratio_stats, stein
from report.values import is_max

# The figures a term is given in: (key in METRICS, label, scale to the unit, unit).
TERM_FIGURES = [
    ("client_p50_ms", "client p50 latency", 1e3, "µs"),
    ("app_cpu_us_per_req", "app CPU per request", 1.0, "µs"),
    ("app_ctx_switches_per_req", "app context switches per request", 1.0, ""),
    ("nginx_cpu_us_per_req", "nginx CPU per request", 1.0, "µs"),
    # Pinned server cores only (NGINX_CPUSET, APP_CPUSET): the kernel's share.
    ("core_system_us_per_req", "server cores' system time per request", 1.0, "µs"),
    ("core_softirq_us_per_req", "server cores' softirq per request", 1.0, "µs"),
]


# A pooled (-ka) path whose app accepted at least this many new connections per
# request did not pool: about 0 where nginx reuses its connections, about 1
# where the app closes each one after its response.
NOT_POOLING = 0.5


def not_pooled(phases, workload, closer=None):
    """{term key: why} for the answer's pooled terms whose paths did not reuse
    connections in this run: the app is a stack that closes every connection
    (closer: its name, from its stacks/<name>/stack.env), or it accepted about one
    new connection per request on a pooled path (app_conns_per_req, where the
    app exports its accept counter)."""
    rounds = by_round(phases, workload)
    out = {}
    for t in TERMS:
        if t.get("answer") != "pooled" or not all(p in rounds for p in t["paths"]):
            continue
        why = [f"{closer} closes every connection, as its stack.env says"] if closer else []
        for p in t["paths"]:
            per = [v for v in rounds[p].get("app_conns_per_req", {}).values() if v is not None]
            if CATALOGUE["paths"][p].get("pooled") and per and sum(per) / len(per) >= NOT_POOLING:
                why.append(f"the app accepted {sum(per) / len(per):.2f} new connections per request on {p}")
        if why:
            out[t["key"]] = "; ".join(why)
    return out


def by_round(phases, workload):
    """{path: {figure: {round: value}}} of one workload's measured phases."""
    out = {}
    for p in phases:
        if p["workload"] == workload:
            for k, v in p["figures"].items():
                out.setdefault(p["path"], {}).setdefault(k, {})[p["round"]] = v
    return out


def resolution_of(phases, workload, paths, figure):
    """The coarsest resolution, per request, of a figure over the phases of
    these paths (phase["resolution"], where its counter is coarse), or None."""
    res = [p.get("resolution", {}).get(figure) for p in phases if p["workload"] == workload and p["path"] in paths]
    res = [r for r in res if r is not None]
    return max(res) if res else None


def term_stats(term, rounds, figure, scale, resolution=None):
    """One term's difference for one figure, or None when a path is missing."""
    a, b = term["paths"]
    less = term.get("less") or []
    if any(p not in rounds for p in [a, b, *less]):
        return None
    get = lambda p: rounds[p].get(figure, {})  # noqa: E731
    return diff_stats(get(a), get(b), scale, resolution, [get(p) for p in less] if less else None)


def figures_for(settings):
    """The breakdown's figures in a mode: flat out (max), a path's latency is
    mostly its queue at the limit, not a cost, so only the costs per request."""
    return [f for f in TERM_FIGURES if f[0] != "client_p50_ms"] if is_max(settings) else TERM_FIGURES


def breakdown(phases, workload, figures=TERM_FIGURES, mixed=None, flat=False, first_stage=None):
    """Every term whose paths were measured: its difference per figure. mixed:
    make load's interleaved phase of the workload, whose blocks give the
    client median's terms (paired at the same instant); the costs come from
    the phases of one path at a time. flat (max mode): each term also has
    "rps", its second path's requests/s over its first's, round by round
    (the answer's throughput, and what make floor sets beside its pair).
    first_stage: a PRECISION run's first stage (its rounds): the answer's
    comparisons get Stein's interval, which keeps its 95% though the run's
    length came from that stage's spread."""
    rounds = by_round(phases, workload)
    blocks = interleaved.blocks(mixed) if mixed else None
    out = {}
    def measured(p):
        return p in rounds or bool(blocks and p in blocks)

    for t in TERMS:
        paths = [*t["paths"], *(t.get("less") or [])]
        if all(measured(p) for p in paths) and not stood_in_for(t, measured):
            out[t["key"]] = {"label": t["label"], "minuend": t["paths"][0], "subtrahend": t["paths"][1],
                             "less": t.get("less"), "control": bool(t.get("control")), "figures": {
                f: (interleaved.block_diff(blocks, *t["paths"], t.get("less"), scale, mixed["block_s"])
                    if blocks and f == "client_p50_ms" else
                    term_stats(t, rounds, f, scale, resolution_of(phases, workload, paths, f)))
                for f, _, scale, _ in figures}}
            # Paired across the two streams (one per connection handling): second b of each, a stream apart.
            d = out[t["key"]]["figures"].get("client_p50_ms")
            if d and d.get("blocks") and interleaved.across(mixed, paths):
                d["across_streams"] = True
            # Every path in the stream, yet too few blocks with a median on all of them: said in the answer.
            out[t["key"]]["blocks_short"] = bool(blocks and all(p in blocks for p in paths)
                                                 and out[t["key"]]["figures"].get("client_p50_ms") is None)
            if flat and all(p in rounds for p in t["paths"]):
                a, b = t["paths"]
                out[t["key"]]["figures"]["rps"] = ratio_stats(rounds[b].get("rps", {}), rounds[a].get("rps", {}))
    # The answer's comparisons are judged together, their own family (at ANSWER_ALPHA), in the answer and the table alike.
    answer_keys = [t["key"] for t in TERMS if t.get("answer") and t["key"] in out]
    for k in answer_keys:
        d = out[k]["figures"].get("rps" if flat else "client_p50_ms")
        if d is not None and not d.get("blocks"):
            stein(d, first_stage)
    holm([out[k]["figures"].get("rps" if flat else "client_p50_ms") for k in answer_keys], ANSWER_ALPHA)
    return out


def back_to_back(load, workload):
    """The pairs of paths (frozensets) that ran back to back in every measured
    round of one path at a time (plan.py runs the answer's pairs so, each path
    once a round); any other comparison over rounds pairs phases further
    apart, up to a round."""
    rounds = {}
    for p in load.get("phases") or []:
        if p["workload"] == workload and p.get("round", 0) > 0 and p["path"] != interleaved.MIX:
            rounds.setdefault(p["round"], []).append(p)
    pairs = None
    for ps in rounds.values():
        order = [p["path"] for p in sorted(ps, key=lambda p: p["start_offset_s"])]
        here = {frozenset(order[i:i + 2]) for i in range(len(order) - 1)}
        pairs = here if pairs is None else pairs & here
    return pairs or set()


def mark_apart(terms, pairs):
    """Each term: whether its rounds pair back-to-back phases (its two paths,
    and the two it takes away, where it does)."""
    for t in terms.values():
        both = [frozenset((t["minuend"], t["subtrahend"]))] + ([frozenset(t["less"])] if t.get("less") else [])
        t["back_to_back"] = all(p in pairs for p in both)


def answer_terms(terms):
    """The answer's terms of a breakdown (breakdown() judged them together, Holm)."""
    return [t for t in TERMS if t.get("answer") and t["key"] in terms]


# A path that failed more than this share of its measured requests (openloop
# exits 1 above it) is given no verdict: only its successes are timed, and
# which of its requests succeeded is not its latency.
MAX_FAILED_SHARE = 0.01


def failures(load, workload):
    """{path: {"requests", "failed", "statuses"}} of a workload's measured
    requests: its interleaved stream's where it has one, else its rounds'."""
    return failures_of([p for p in load.get("phases") or [] if p.get("workload") == workload and p.get("round", 0) > 0])


def failures_of(measured):
    """failures() of these measured phases (a workload's, or a sweep step's):
    the interleaved streams' requests where there are any, else each phase's."""
    streams = [p for p in measured if p.get("path") == interleaved.MIX]
    per_path = ([(path, v) for p in streams for path, v in (p.get("by_path") or {}).items()] if streams
                else [(p["path"], p) for p in measured])
    out = {}
    for path, v in per_path:
        f = out.setdefault(path, {"requests": 0, "failed": 0, "statuses": {}})
        f["requests"] += v.get("requests") or 0
        f["failed"] += round((v.get("failed_rate") or 0) * (v.get("requests") or 0))
        for k, n in (v.get("statuses") or {}).items():
            f["statuses"][k] = f["statuses"].get(k, 0) + n
    return out


def failed_share(f):
    """A path's failed share (failures()'s entry) where it is past
    MAX_FAILED_SHARE, else None: such a path gets no verdict and no ratio."""
    if f and f["requests"] and f["failed"] > MAX_FAILED_SHARE * f["requests"]:
        return f["failed"] / f["requests"]
    return None


def failed_paths(t, failed):
    """[(path, failed share)] of an answer pair's paths past MAX_FAILED_SHARE,
    the socket's first."""
    return [(path, failed_share(failed.get(path))) for path in reversed(t["paths"])
            if failed_share(failed.get(path)) is not None]
