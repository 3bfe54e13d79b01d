"""Where the time goes (pure): catalogue.json's breakdown terms, one path's
figure minus another's round by round (less two more, for a difference in
differences), and the answer in plain words: the terms the catalogue marks
`answer`, judged together (Holm), with the controls beside them."""
import math

import numpy as np
from scipy import stats as sps

from report import interleaved
from report.lab import CATALOGUE, TERMS, listener_of, nginx_of, stood_in_for
from report.lab import margin_pct as margin_pct_setting
from report.stats import (ALPHA, ANSWER_ALPHA, diff_stats, fmt_interval, has_interval, holm, judge, lost_to, measurable,
                          no_interval, ratio_stats, significant, stein)
from report.values import generator, is_max

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
# The connection handlings the answer speaks of, in its words.
HANDLING = {"new": "with a new connection per request", "pooled": "with pooled keepalive connections"}


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


def pooled_words(reasons):
    """How the answer names its pooled comparisons: as pooled, or, where the
    paths did not pool, as what they were."""
    if not reasons:
        return HANDLING["pooled"]
    why = "; ".join(dict.fromkeys(reasons.values()))
    return f"on the keepalive (-ka) paths, which did not reuse connections here ({why})"


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


def lost_to_holm(d):
    """A difference whose own interval excludes zero but that Holm's correction
    over the answer's comparisons does not call measurable."""
    return lost_to(d) == "holm"


def judged_together(d):
    """How a correction that took d back is said: the report's comparisons
    judged together (Benjamini-Hochberg), or None."""
    return (f"once the report's {d['fdr_family']} comparisons are judged together (Benjamini-Hochberg)"
            if lost_to(d) == "fdr" else None)


def fmt_diff(d, unit="µs", share=True):
    """A difference as the report words it: a number only when it is
    measurable, always with its interval; share adds it as a share of the
    first path's figure."""
    if d is None:
        return "n/a"
    u = f" {unit}" if unit else ""
    if not has_interval(d):
        return f"{d['mean']:,.1f}{u} ({no_interval(d)}: no interval, no verdict)"
    ci = fmt_interval(d, unit)
    if lost_to_holm(d):
        return f"no measurable difference once the answer's comparisons are judged together ({ci} alone)"
    if judged_together(d):
        return f"no measurable difference {judged_together(d)} ({ci} alone)"
    if significant(d) and not measurable(d):
        return f"below the counter's resolution ({d['resolution']:,.1f}{u}; {ci})"
    if not measurable(d):
        return f"no measurable difference ({ci})"
    rel = f", {d['relative']:.0%} of the first" if share and d.get("relative") else ""
    return f"{d['mean']:,.1f}{u} ({ci}{rel})"


def answer_terms(terms):
    """The answer's terms of a breakdown (breakdown() judged them together, Holm)."""
    return [t for t in TERMS if t.get("answer") and t["key"] in terms]


def control_note(terms, figure="client_p50_ms", unit="µs", decimals=0):
    """The controls' verdicts in words, and a warning where one failed."""
    out = []
    for t in TERMS:
        if not t.get("control") or t["key"] not in terms:
            continue
        d = terms[t["key"]]["figures"].get(figure)
        if d is None:
            continue
        if measurable(d):
            out.append(f"**the control failed**: {t['label'].removeprefix('control: ')} came out at {d['mean']:,.{decimals}f} {unit} "
                       f"({fmt_interval(d, unit, decimals)}): the two nginx differ, so the comparisons across "
                       "them (the bridge) carry that difference; the same-nginx pairs do not")
        else:
            out.append(f"control held: {t['label'].removeprefix('control: ')}, {fmt_diff(d, unit, share=False)}")
    return out


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


def failure_cause(path, statuses):
    """What a failing path's commonest failure most likely means."""
    st = {k: n for k, n in statuses.items() if n and k != "0"} or {k: n for k, n in statuses.items() if n}
    top = max(st, key=st.get) if st else None
    socket = listener_of(path) == "unix"
    if top == "502":
        return ("nginx could not connect to the app's socket: its mode or group keeps nginx out (make contract), its "
                "listen backlog overflowed (net.core.somaxconn), or the app is down" if socket else
                "nginx could not connect to the app's TCP port: the app is down or not listening there, or its "
                "backlog overflowed")
    if top == "504":
        return "the app did not answer within nginx's proxy_read_timeout"
    if top == "503":
        return "nginx's connection budget (or the app's own limit) turned them away"
    if top in ("0", "refused", "reset", "timeout", "connect_timeout"):
        return "no response reached the generator: nginx refused or reset the connection, or the request timed out"
    return "see the statuses"


def failed_paths(t, failed):
    """[(path, failed share)] of an answer pair's paths past MAX_FAILED_SHARE,
    the socket's first."""
    out = []
    for path in reversed(t["paths"]):
        f = failed.get(path)
        if f and f["requests"] and f["failed"] > MAX_FAILED_SHARE * f["requests"]:
            out.append((path, f["failed"] / f["requests"]))
    return out


def failed_words(t, failed):
    """The answer table's verdict for a pair with a path past
    MAX_FAILED_SHARE ("no verdict: uds-lo failed 40%"), else None."""
    f = failed_paths(t, failed)
    return "no verdict: " + ", ".join(f"{p} failed {s:.0%}" for p, s in f) if f else None


def failed_phrase(t, failed):
    """No verdict for an answer pair with a path past MAX_FAILED_SHARE, in
    words: the path, its share and statuses, the likely cause; else None."""
    out = []
    for path, share in failed_paths(t, failed):
        f = failed[path]
        st = ", ".join(f"{k}: {n:,}" for k, n in sorted(f["statuses"].items(), key=lambda kv: -kv[1]) if n)
        out.append(f"`{path}` failed {share:.0%} of its requests ({st or 'no status'}): "
                   f"{failure_cause(path, f['statuses'])}")
    if not out:
        return None
    a, b = t["paths"]
    return (f"**no verdict** against {t['against']} (`{b}` against `{a}`): " + "; ".join(out)
            + f" (more than {MAX_FAILED_SHARE:.0%} failed: its successes alone are timed, so no difference is read)")


# The longest stream (seconds) and the most rounds a "not sure yet" names.
MOST_TO_DECIDE = 3600
MOST_ROUNDS_TO_DECIDE = 100
# The chance with which the length a "not sure yet" names must decide
# (report/test_calibration_projection.py holds it to that).
POWER = 0.8
# The fewest degrees of freedom a projection is made from: with 2 (20 blocks,
# 3 rounds) the measured spread itself is too uncertain to say how long
# would decide.
MIN_DOF_TO_PROJECT = 3


def dof_of(d, n=None):
    """The degrees of freedom of a difference's t-interval at n values (its own
    by default): the stream's rule for its blocks, n - 1 for rounds."""
    n = n or d["rounds"]
    return interleaved.dof(n) if d.get("blocks") else n - 1


def half_width(d, n=None, k=1):
    """The half-width of d's interval at n values with its spread, at 1 -
    ALPHA/k (Bonferroni over k comparisons judged together)."""
    own = dof_of(d)
    se = (d["hi"] - d["lo"]) / 2 / sps.t.ppf(1 - ALPHA / 2, own)  # the standard error at its own n
    n = n or d["rounds"]
    return sps.t.ppf(1 - ALPHA / (2 * k), dof_of(d, n)) * se * math.sqrt(d["rounds"] / n)


def chance_to_decide(d, n, margin, k, grid=32):
    """The chance that a new run of n values (usable blocks or rounds) decides
    d's comparison (its interval at 1 - ALPHA/k excludes 0, or lies inside
    ±margin) if the true difference is the one measured: its mean normal
    about that, its standard error this run's scaled to n but itself
    uncertain as this run measured it (true variance s² ν₀ / χ²(ν₀)), and the
    new run's own estimate of it a χ²(ν)/ν draw on n's degrees of freedom,
    independent of its mean (exactly so for normal values). A grid of
    quantiles over both spreads; the mean's chance in closed form: the run
    stays undecided only where margin - h <= |mean| <= h."""
    q = (np.arange(grid) + 0.5) / grid
    nu0, nu = dof_of(d), dof_of(d, n)
    se_now = half_width(d) / sps.t.ppf(1 - ALPHA / 2, nu0)
    s = (se_now * math.sqrt(d["rounds"] / n) * np.sqrt(nu0 / sps.chi2.ppf(q, nu0)))[:, None]
    h = sps.t.ppf(1 - ALPHA / (2 * k), nu) * s * np.sqrt(sps.chi2.ppf(q, nu) / nu)[None, :]
    m, lo = abs(d["mean"]), np.maximum(margin - h, 0.0)
    undecided = (sps.norm.cdf((h - m) / s) - sps.norm.cdf((lo - m) / s)
                 + sps.norm.cdf((-lo - m) / s) - sps.norm.cdf((-h - m) / s))
    return float(1 - np.where(h > lo, undecided, 0.0).mean())


def to_decide(d, margin, k):
    """How many values in all (usable blocks or rounds) would decide a
    difference that is neither measurable nor inside ±margin (its units)
    with chance POWER if the true difference is the one measured
    (chance_to_decide); None where its degrees of freedom are under
    MIN_DOF_TO_PROJECT or beyond MOST_TO_DECIDE (MOST_ROUNDS_TO_DECIDE)."""
    if dof_of(d) < MIN_DOF_TO_PROJECT:
        return None
    n0 = d["rounds"]
    most = max(n0 + 1, MOST_TO_DECIDE // (d.get("block_s") or 1) if d.get("blocks") else MOST_ROUNDS_TO_DECIDE)
    decides = lambda n: chance_to_decide(d, n, margin, k) >= POWER  # noqa: E731
    lo, hi = n0, n0 + 1
    while not decides(hi):  # doubling, then halving: the chance grows with n
        if hi >= most:
            return None
        lo, hi = hi, min(most, n0 + 2 * (hi - n0))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if decides(mid) else (mid, hi)
    return hi


def projected(d, n):
    """(length, more) of a run whose usable values number n: blocks or
    rounds lost in this run (d["dropped"]) are lost as often in it, so the
    length is n over this run's usable share (a stream's in seconds,
    INTERLEAVE; else rounds, ROUNDS), more what it adds to this run's."""
    had = d["rounds"] + (d.get("dropped") or 0)
    total = math.ceil(n * had / d["rounds"] - 1e-9)
    step = (d.get("block_s") or 1) if d.get("blocks") else 1
    return total * step, (total - had) * step


def inside_margin(d, margin, k):
    """Whether d's interval, widened for the k comparisons judged together
    (Bonferroni), lies strictly inside ±margin (its units): equivalence, TOST."""
    half = half_width(d, k=k)
    return bool(margin) and bool(-margin < d["mean"] - half and d["mean"] + half < margin)


def three_way(d, margin_pct, k):
    """The answer's verdict on one comparison: "differs" (measurable once the
    answer's comparisons are judged together), "same" (not measurable, its
    interval inside the margin: inside_margin()), or "unsure"; with the
    margin in µs, inside_margin (a difference inside the margin is both
    "differs" and inside it: the verdict says both) and, when unsure, how
    many values in all would decide with chance POWER (to_decide)."""
    margin = margin_pct / 100 * abs(d.get("a_mean") or 0)
    inside = inside_margin(d, margin, k)
    if measurable(d) and not lost_to_holm(d) and not judged_together(d):
        return {"verdict": "differs", "margin": margin, "inside_margin": inside}
    half = half_width(d, k=k)
    if inside:
        return {"verdict": "same", "margin": margin, "inside_margin": True,
                "widened": (d["mean"] - half, d["mean"] + half)}
    return {"verdict": "unsure", "margin": margin, "inside_margin": False, "to_decide": to_decide(d, margin, k)}


def answer(w, phases, settings, terms=None, unpooled=None, route=None, failed=None, margin_pct=None, parts=None):
    """The answer for one workload in plain words (report.json's "answer"):
    answer_parts() (parts, if already computed) as one paragraph; margin_pct: MARGIN (lab.margin_pct())."""
    if is_max(settings):
        return max_answer(w, phases, settings, unpooled, terms, failed)
    parts = parts or answer_parts(w, phases, settings, terms, unpooled, route, failed, margin_pct)
    if not parts["rows"] or all(r["phrase"] is None for r in parts["rows"]) and not parts["failed"]:
        out = (f"**`{w}`**: this run did not measure the socket and TCP through the same nginx with the same "
               "connection handling (PATHS needs a pair of catalogue.json's answer terms, e.g. tcp-lo and "
               "uds-lo): no answer to give.")
        return out + "".join(f" {n[0].upper()}{n[1:]}." for n in parts["controls"])
    sentences = [f"{x[0].upper()}{x[1:]}." for x in parts["failed"]]
    for handling in HANDLING:
        said = [r["phrase"] for r in parts["rows"] if r["handling"] == handling and r["phrase"]]
        if said:
            words = next(r["handling_words"] for r in parts["rows"] if r["handling"] == handling)
            sentences.append(f"{words[0].upper()}{words[1:]}, the socket " + "; it ".join(said) + ".")
    out = f"**`{w}`** (`{parts['route']}`), {parts['at']}, client median: " + " ".join(sentences)
    out += f" {parts['method']}; {parts['judged']}."
    if parts["controls"]:
        out += " " + "; ".join(n[0].upper() + n[1:] for n in parts["controls"]) + "."
    return out + parts["note"]


def projection_words(d, more):
    """How much longer a run would decide a "not sure yet" (to_decide()'s
    usable values, more), in words: in seconds of stream (INTERLEAVE) or
    rounds (ROUNDS), counting the blocks or rounds this run lost; or why
    none is said."""
    over = "blocks" if d.get("blocks") else "rounds"
    if dof_of(d) < MIN_DOF_TO_PROJECT:
        return (f"{d['rounds']} usable {over} ({dof_of(d)} degrees of freedom) are too few to say how much longer "
                f"would decide")
    length, extra = projected(d, more) if more else (None, None)
    chance = f"would decide {POWER * 10:.0f} times in 10 if the true difference is the one measured"
    if d.get("blocks"):
        if length is None or length > MOST_TO_DECIDE:
            return f"more than {MOST_TO_DECIDE // 60} minutes of stream would be needed to decide"
        return f"a stream of {length:,} s (INTERLEAVE={length}, {extra:,} s more) {chance}"
    if length is None:
        return f"more than {MOST_ROUNDS_TO_DECIDE} rounds would be needed to decide"
    return f"{length} rounds (ROUNDS={length}, {extra} more) {chance}"


def answer_parts(w, phases, settings, terms=None, unpooled=None, route=None, failed=None, margin_pct=None):
    """The answer for one workload (rate mode), in parts: one row per
    comparison of the answer (its verdict, figures and words: the report's
    answer table; phrase: the same in a sentence), the sentences of the pairs
    with no verdict because a path failed, the controls' notes, the method.
    terms: the workload's breakdown, if already computed; unpooled:
    not_pooled()'s answer; failed: failures()'s, a pair with a path past
    MAX_FAILED_SHARE getting no verdict; margin_pct: MARGIN (None: .env's default)."""
    terms = terms if terms is not None else breakdown(phases, w)
    route = route or next((p.get("endpoint") for p in phases if p["workload"] == w), None) or w
    failed = failed or {}
    margin_pct = margin_pct_setting() if margin_pct is None else margin_pct
    chosen = answer_terms(terms)
    rows = [answer_row(t, terms[t["key"]], len(chosen), margin_pct, unpooled, failed) for t in chosen]
    judged = (f"the {len(chosen)} comparisons are judged together (Holm's correction)" if len(chosen) > 1
              else "one comparison") + f", their own family at {ANSWER_ALPHA:.0%} of the report's {ALPHA:.0%}"
    method = interleaved.describe({t["key"]: terms[t["key"]] for t in chosen}) or \
        "Each interval is a 95% paired t-interval over rounds"
    return {"workload": w, "route": route, "rows": rows, "margin_pct": margin_pct,
            "at": f"at {settings['rate']} req/s" if settings.get("rate") else "at a fixed rate",
            "failed": [x for x in (failed_phrase(t, failed) for t in chosen) if x],
            "controls": control_note(terms), "method": method, "judged": judged,
            "note": slower_pooled_note(terms, chosen, unpooled)}


def answer_row(t, term, k, margin_pct, unpooled, failed):
    """One comparison of the answer: its verdict (differs, same, unsure, or
    none: failed, too few blocks, no interval), its figures, a short verdict in
    words (the answer table's) and a phrase (the answer's paragraph; None where
    the pair is said elsewhere or not at all)."""
    d = term["figures"]["client_p50_ms"]
    a, b = t["paths"]
    pair = f"`{b}` against `{a}`"
    row = {"handling": t["answer"], "against": t["against"], "pair": [b, a], "nginx": [nginx_of(b), nginx_of(a)],
           "handling_words": pooled_words(unpooled) if t["answer"] == "pooled" else HANDLING[t["answer"]],
           "verdict": "none", "inside_margin": None, "saved_us": None, "share": None, "lo": None, "hi": None,
           "phrase": None}
    if failed_words(t, failed):
        return {**row, "words": failed_words(t, failed), "phrase": None}
    if d is None:
        if term.get("blocks_short"):
            short = (f"fewer than {interleaved.MIN_BLOCKS} blocks in which both paths had a median (each from "
                     f"{interleaved.MIN_BLOCK_REQUESTS} or more successful requests)")
            row["phrase"] = f"was not judged against {t['against']} ({pair}): {short}"
            row["words"] = f"not judged: {short}"
        return {**row, "words": row.get("words") or "not measured"}
    row.update({"saved_us": d["mean"], "share": d.get("relative"), "lo": d.get("lo"), "hi": d.get("hi"),
                "blocks": d.get("blocks"), "rounds": d["rounds"]})
    if d["rounds"] < 2:
        return {**row, "words": "no verdict: 1 round, no interval (ROUNDS >= 2 gives one)",
                "phrase": (f"differed by {d['mean']:,.0f} µs against {t['against']} ({pair}) in its 1 round: "
                           "no interval, no verdict (ROUNDS >= 2 gives one)")}
    if not has_interval(d):
        return {**row, "words": f"no verdict: {no_interval(d)}, no interval",
                "phrase": (f"differed by {d['mean']:,.0f} µs against {t['against']} ({pair}) in each of its "
                           f"{no_interval(d)}: no interval, no verdict")}
    ci = fmt_interval(d, "µs", 0)
    v = three_way(d, margin_pct, k)
    row.update(verdict=v["verdict"], margin_us=v["margin"], inside_margin=v["inside_margin"])
    if v["verdict"] == "same":
        lo, hi = v["widened"]
        widened = f", {lo:,.0f} to {hi:,.0f} widened for the {k} comparisons" if k > 1 else ""
        row["words"] = f"no difference larger than ±{margin_pct:g}% (±{v['margin']:,.0f} µs)"
        row["phrase"] = (f"made no difference larger than ±{margin_pct:g}% ({v['margin']:,.0f} µs) against "
                         f"{t['against']} ({pair}: {ci}{widened}, inside the margin: equivalent)")
        return row
    if v["verdict"] == "unsure":
        alone = " alone" if lost_to_holm(d) or judged_together(d) else ""
        decide = projection_words(d, v["to_decide"])
        row["words"] = f"not sure yet: {decide}"
        row["taken_back"] = bool(alone)
        row["phrase"] = (f"is not told apart from {t['against']} yet ({pair}: {ci}{alone}, neither excluding 0 nor "
                         f"inside ±{margin_pct:g}%, {v['margin']:,.0f} µs): not sure yet; {decide}")
        return row
    verb = "saved" if d["mean"] > 0 else "cost"
    # Measurable and inside the margin: both are true, so both are said.
    inside = f": inside the ±{margin_pct:g}% that counts" if v["inside_margin"] else ""
    row["words"] = (f"{'faster' if d['mean'] > 0 else 'slower'} by {abs(d['mean']):,.0f} µs "
                    f"({abs(d['relative']):.0%}){inside}")
    row["phrase"] = (f"{verb} {abs(d['mean']):,.0f} µs ({abs(d['relative']):.0%} of {a}'s median) against "
                     f"{t['against']} ({pair}: {ci})"
                     + (f", inside the ±{margin_pct:g}% ({v['margin']:,.0f} µs) that counts: no difference larger "
                        "than that" if v["inside_margin"] else ""))
    return row


# Where the pooled socket measurably cost latency: what the test bed found
# behind it (docs/results.md), labelled as that, with the run's own figure to read.
SLOWER_POOLED = (" Where the pooled socket is slower at a fixed rate: on the test bed it was sleeps, not the data "
                 "path (nginx and the app each slept in epoll_wait with their core going idle about 0.3-0.5 more "
                 "times per request over the socket, and waking an idle virtual core is dear there; gone at 2,000 "
                 "req/s, reversed flat out: docs/results.md, \"why the pooled socket is slower\"); this run's app "
                 "context switches per request are in \"Where the time goes\".")


def slower_pooled_note(terms, chosen, unpooled):
    """SLOWER_POOLED where a pooled answer pair that did pool shows the socket
    measurably slower; "" otherwise."""
    for t in chosen:
        d = terms[t["key"]]["figures"]["client_p50_ms"]
        if (t["answer"] == "pooled" and not unpooled and d and d["rounds"] >= 2 and has_interval(d)
                and measurable(d) and not lost_to_holm(d) and not judged_together(d) and d["mean"] < 0):
            return SLOWER_POOLED
    return ""


def max_answer(w, phases, settings, unpooled=None, terms=None, failed=None):
    """In max mode the answer is throughput: each socket path's requests/s
    against TCP's through the same nginx, as a ratio with its interval (from
    the breakdown with flat=True, where the report judged them); a pair with
    a path past MAX_FAILED_SHARE gets failed_phrase() instead (failed:
    failures()'s): a path that fails fast carries more requests/s."""
    terms = terms if terms is not None else breakdown(phases, w, figures_for(settings), flat=True)
    failed = failed or {}
    chosen = [t for t in TERMS if t.get("answer") and (terms.get(t["key"]) or {}).get("figures", {}).get("rps")]
    ratios = [terms[t["key"]]["figures"]["rps"] for t in chosen]
    refused = [x for x in (failed_phrase(t, failed) for t in chosen) if x]
    parts = []
    for t, r in zip(chosen, ratios):
        a, b = t["paths"]
        if r is None or failed_phrase(t, failed):
            continue
        status = judge(r)
        if status == "single":
            parts.append(f"{b} carried {r['mean']:.2f}x the requests/s of {a} ({no_interval(r)}): no interval, no verdict")
        elif status == "straddles" and lost_to_holm(r):
            parts.append(f"{b} against {a}: no measurable difference once the comparisons are judged together "
                         f"({fmt_interval(r, times=True)} alone)")
        elif status == "straddles" and judged_together(r):
            parts.append(f"{b} against {a}: no measurable difference {judged_together(r)} "
                         f"({fmt_interval(r, times=True)} alone)")
        elif status == "straddles":
            parts.append(f"{b} against {a}: no measurable difference ({fmt_interval(r, times=True)})")
        else:
            parts.append(f"{b} carried {r['mean']:.2f}x the requests/s of {a} ({fmt_interval(r, times=True)})")
    if not parts and not refused:
        return (f"**`{w}`**: this run did not measure the socket and TCP through the same nginx: "
                "no answer to give.")
    judged = len([r for r in ratios if r is not None])
    out = (f"**`{w}`**, each path flat out ({generator(settings)}, {settings.get('connections')} connections): "
           + "".join(f"{x[0].upper()}{x[1:]}. " for x in refused)
           + (f"{'; '.join(parts)}. " if parts else "")
           + f"Ratios of the geometric mean, Holm's correction over {judged} comparisons, their own family at "
           f"{ANSWER_ALPHA:.0%} of the report's {ALPHA:.0%}.")
    if unpooled:
        words = pooled_words(unpooled)
        out += f" {words[0].upper()}{words[1:]}, each request opened a new connection too."
    return out


def max_answer_parts(w, phases, settings, unpooled=None, terms=None, failed=None):
    """max_answer() in parts, for the report's answer table: one row per
    comparison, the socket's requests/s as a ratio of TCP's with its
    interval and verdict (differs, none: no measurable difference, no
    interval, or a path past MAX_FAILED_SHARE: no ratio at all, the pair
    said in "failed" as make load's answer says it)."""
    terms = terms if terms is not None else breakdown(phases, w, figures_for(settings), flat=True)
    failed = failed or {}
    chosen = [t for t in TERMS if t.get("answer") and (terms.get(t["key"]) or {}).get("figures", {}).get("rps")]
    rows = []
    for t in chosen:
        r = terms[t["key"]]["figures"]["rps"]
        a, b = t["paths"]
        status = judge(r)
        row = {"handling": t["answer"], "against": t["against"], "pair": [b, a], "nginx": [nginx_of(b), nginx_of(a)],
               "handling_words": pooled_words(unpooled) if t["answer"] == "pooled" else HANDLING[t["answer"]],
               "ratio": r["mean"], "lo": r.get("lo"), "hi": r.get("hi"), "phrase": None,
               "taken_back": status == "straddles" and bool(lost_to(r))}
        if failed_words(t, failed):
            row.update(verdict="none", words=failed_words(t, failed), ratio=None, lo=None, hi=None, taken_back=False)
        elif status == "single":
            row.update(verdict="none", words=f"no verdict: {no_interval(r)}, no interval")
        elif status == "straddles":
            row.update(verdict="none", words="no measurable difference")
        else:
            row.update(verdict="differs", words=f"{'more' if r['mean'] > 1 else 'fewer'} requests/s: "
                                                f"{r['mean']:.2f}x TCP's")
        rows.append(row)
    judged = (f"Holm's correction over the {len(rows)} comparisons, their own family at {ANSWER_ALPHA:.0%} of the "
              f"report's {ALPHA:.0%}")
    return {"workload": w, "route": next((p.get("endpoint") for p in phases if p["workload"] == w), None) or w,
            "rows": rows, "max": True, "margin_pct": None,
            "failed": [x for x in (failed_phrase(t, failed) for t in chosen) if x], "controls": [], "note": "",
            "at": f"each path flat out ({generator(settings)}, {settings.get('connections')} connections)",
            "method": "Ratios of the geometric mean of paired rounds, each a 95% t-interval on the log ratios",
            "judged": judged}
