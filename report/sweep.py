"""make sweep: latency against load, every path at rising fixed rates.

loadgen/drive.py, the run's program, runs the sweep a step at a time
(plan.py's SWEEP_STEP, k6 at the step's rate) and calls check() between
steps: it merges the step just run (load-s<N>.json) into load.json, judges
each of its paths, and says one line per path, and the next step's settings
or that the sweep is done. A path fails a step when more than MAX_ERRORS of its requests failed
(the 95% Clopper-Pearson interval of the step's failed share wholly above
it) or it held less than MIN_HELD of the rate (the 95% t-interval of its
requests/s over the step's rounds wholly below it); with no interval (one
round, or rounds all equal) the point figure is held to the same threshold,
and the verdict says it is a threshold on one run. A path leaves the sweep
once it has failed the plan's stop_after_failures steps, so a sweep past
every limit stays bounded.

`make report` on a sweep run writes its report from load.json (k6's own
statistics) and, where Prometheus answers, each phase's server figures as a
run of make load has them: per step and path the achieved rate and the
client's p50, p90, p99 and p99.9 over rounds with their 95% intervals, what
failed and how, the app's and nginx's CPU per request and nginx's 5xx, what
the socket saved at each rate through the same nginx (paired second by
second in the step's interleaved stream, as make load's answer; over rounds
where the step has none), each path's knee and how it failed past it, and a chart
of latency against achieved load (report/sweep_render.py words it and draws it). A step whose generator used 90% or more of
its CPU limit is k6's, not the path's: said, and left out of the knee."""
import math
from statistics import NormalDist
from scipy import stats as sps
from report.breakdown import failures_of
from report.words import failed_phrase
from report.interleaved import MIX, block_diff, combine
from report.interleaved import blocks as mix_blocks
from report.lab import TERMS, stood_in_for
from report.precision import merge
from report.stats import ALPHA, CONFIDENCE, diff_stats, holm, ratio_stats, t_interval
from report.warnings import MAX_GENERATOR_CPU_SHARE, MAX_LATE_SHARE, MIN_RATE_SHARE, warning

MAX_ERRORS = 0.01  # a step fails past this share of failed requests
MIN_HELD = MIN_RATE_SHARE  # ... or below this share of its rate achieved, as make load's saturated warning


# The knee: the last rate a path held, rising, before the first step it failed
# or its p99 passed this many times its p99 at the lowest step. Its tail, not
# its median: on a small VM the p99 is already 10-20x the median at a low
# rate. Each p99 is of the step's requests pooled over its rounds (about
# 7,500 at 500 req/s), not a mean of its phases' p99s (one 5 s phase's p99
# moves by tens of percent).
KNEE_FACTOR = 10


# Each phase's durations as load.json has them: (key, the share of requests at or under it).
QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999), ("max", 1.0))


NORMAL = NormalDist()  # the standard normal, in the standard library: called thousands of times a step
Z = {q: NORMAL.inv_cdf(q) for _, q in QUANTILES if q < 1}


def measured(load):
    """The measured phases of one path at a time (a step's interleaved stream is no path's)."""
    return [p for p in load["phases"] if p.get("round", 0) >= 1 and p.get("step") and p.get("path") != MIX]


def streams(load):
    """{step: its measured interleaved stream} (a sweep of rates with INTERLEAVE; where the step has one per
    connection handling, both as one: report/interleaved.py's combine)."""
    by_step = {}
    for p in load["phases"]:
        if p.get("round", 0) >= 1 and p.get("step") and p.get("path") == MIX:
            by_step.setdefault(p["step"], []).append(p)
    return {step: combine(ps) for step, ps in by_step.items()}


def stream_held(stream):
    """Whether a step's stream held MIN_HELD of its rate: below, its latency is a queue's."""
    sent = sum(v["requests"] for v in (stream.get("by_path") or {}).values())
    return sent >= MIN_HELD * stream["rate"] * stream["duration_s"]


def rps(p):
    return p["requests"] / p["duration_s"] if p["duration_s"] else 0.0


def interval(values):
    """{mean, lo, hi, rounds} of a figure over rounds (None when no value)."""
    vs = [v for v in values if v is not None]
    if not vs:
        return None
    m, lo, hi, _ = t_interval(vs)
    return {"mean": m, "lo": lo, "hi": hi, "rounds": len(vs)}


def phase_cdf(d, x):
    """The share of a phase's requests at or under x ms, from the quantiles
    load.json keeps: between two of them, the normal quantile of the share
    linear in log x (exact for a lognormal tail, which latency has more
    nearly than a straight line); past p99.9, linear up to the maximum."""
    pts = [(d[k], q) for k, q in QUANTILES if d.get(k) and q < 1]
    top = d.get("max") or pts[-1][0]
    if x <= 0 or not pts:
        return 0.0
    if x >= top:
        return 1.0
    if x >= pts[-1][0]:
        x0, q0 = pts[-1]
        return q0 + (1 - q0) * (x - x0) / (top - x0) if top > x0 else 1.0
    # Below the median: the first segment extended (the knee never reads there).
    segs = list(zip(pts, pts[1:])) or [((pts[0][0] / 2, 0.25), pts[0])]
    for (x0, q0), (x1, q1) in segs:
        if x <= x1 or (x1, q1) == segs[-1][1]:
            if x1 <= x0:
                return q1 if x >= x1 else q0
            z0, z1 = Z.get(q0) or NORMAL.inv_cdf(q0), Z.get(q1) or NORMAL.inv_cdf(q1)
            return NORMAL.cdf(z0 + (z1 - z0) * (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0)))
    return 1.0


def pooled_quantile(phases, q=0.99):
    """The q-quantile of all the phases' requests pooled (ms), with a 95%
    interval: the ranks q +- z sqrt(q(1-q)/n) of the pooled requests (order
    statistics, the requests taken as independent), each read off the pooled
    distribution the phases' quantiles give. None without requests."""
    ps = [(p["requests"], p.get("duration_ms") or {}) for p in phases if p["requests"] and p.get("duration_ms")]
    n = sum(k for k, _ in ps)
    if not n:
        return None
    top = max(max(v for v in d.values() if v is not None) for _, d in ps)

    def at(share):  # the pooled distribution's inverse, by bisection
        lo, hi = 0.0, top
        for _ in range(30):  # a billionth of the range
            mid = (lo + hi) / 2
            if sum(k * phase_cdf(d, mid) for k, d in ps) / n < share:
                lo = mid
            else:
                hi = mid
        return hi

    half = sps.norm.ppf(1 - ALPHA / 2) * math.sqrt(q * (1 - q) / n)
    return {"value": at(q), "lo": at(max(0.0, q - half)), "hi": at(min(1.0, q + half)), "requests": n}


def failure(ps, rate, requests, failed, achieved):
    """Why a path failed a step, judged on intervals: its failed share's
    (Clopper-Pearson) wholly above MAX_ERRORS, or its requests/s's over
    rounds wholly below MIN_HELD of the rate; where the rate has no interval,
    its point figure against the threshold, said so. (why or None, borderline
    or None: a point figure past a threshold that its interval does not
    clear.)"""
    why, near = [], []
    if requests and failed / requests > MAX_ERRORS:
        share = f"{failed / requests:.1%} of requests failed"
        lo = sps.binomtest(round(failed), requests).proportion_ci(CONFIDENCE).low
        (why if lo > MAX_ERRORS else near).append(share if lo > MAX_ERRORS else
                                                  f"{share}, its 95% interval reaching {lo:.2%}")
    if rate and achieved["mean"] < MIN_HELD * rate:
        held = f"held {achieved['mean']:,.0f} of {rate:,} req/s"
        if achieved["hi"] is None:
            why.append(f"{held} (one run's figure against the threshold: no interval over rounds)")
        elif achieved["hi"] < MIN_HELD * rate:
            why.append(held)
        else:
            near.append(f"{held}, its 95% interval reaching {achieved['hi']:,.0f}")
    return "; ".join(why) or None, "; ".join(near) or None


# Server figures per step (the report's, per phase), over rounds.
SERVER = ("app_cpu_us_per_req", "nginx_cpu_us_per_req", "nginx_5xx", "generator_cpu_cores")


def step_outcome(phases, rate, server=None, generator_cpus=None, gen="k6"):
    """One step's figures per path, and whether the path held it: failed is
    None, or why it did not; generator is None, or why the step is k6's
    limit. server: {phase name: its server figures}."""
    server = server or {}
    out = {}
    for path in dict.fromkeys(p["path"] for p in phases):
        ps = [p for p in phases if p["path"] == path]
        requests = sum(p["requests"] for p in ps)
        failed = sum(p["failed_rate"] * p["requests"] for p in ps)
        achieved = interval([rps(p) for p in ps])
        statuses = {}
        for p in ps:
            for st, n in (p.get("statuses") or {}).items():
                statuses[st] = statuses.get(st, 0) + n
        why, near = failure(ps, rate, requests, failed, achieved)
        figs = {k: interval([(server.get(p["name"]) or {}).get(k) for p in ps]) for k in SERVER}
        k6 = figs["generator_cpu_cores"]
        busy = generator_cpus and k6 and k6["mean"] >= MAX_GENERATOR_CPU_SHARE * generator_cpus
        late = late_share(ps)
        out[path] = {
            "rate": rate, "connections": ps[0].get("connections"), "achieved": achieved, "error_share": failed / requests if requests else None,
            "dropped": sum(p.get("dropped_iterations") or 0 for p in ps), "statuses": statuses,
            **{q: interval([(p.get("duration_ms") or {}).get(q) for p in ps]) for q in ("p50", "p90", "p99", "p999")},
            "pooled_p99": pooled_quantile(ps),
            **figs,
            "failed": why, "borderline": near,
            "late_share": late,
            "generator_cpu_share": k6["mean"] / generator_cpus if generator_cpus and k6 else None,
            "generator": f"{gen} used {k6['mean']:.2f} of its {generator_cpus:g} CPUs" if busy else None,
        }
    return out


def late_share(phases):
    """The largest share of a path's requests its generator sent over 1 ms
    behind their due time in any round of a step (openloop's late_rate), or
    None where a phase does not say (k6, wrk)."""
    shares = [p.get("late_rate") for p in phases]
    return max(shares) if shares and None not in shares else None


def steps(load, server=None, generator_cpus=None):
    """{step: step_outcome} of every step merged so far."""
    by_step = {}
    for p in measured(load):
        by_step.setdefault(p["step"], []).append(p)
    gen = load["settings"]["generator"]
    return {s: step_outcome(ps, ps[0].get("rate"), server, generator_cpus, gen) for s, ps in sorted(by_step.items())}


def level(o):
    """A step's level in words: its rate, or its connections flat out."""
    return f"{o['rate']:,} req/s" if o["rate"] else f"{o['connections']:,} connections"


def decide(load):
    """(lines, next step or None, its paths): the last step judged, and which
    paths go on (those that have failed fewer than stop_after_failures steps)."""
    s = load["settings"]
    done = steps(load)
    last = max(done)
    failures = {}
    for outcome in done.values():
        for path, o in outcome.items():
            failures[path] = failures.get(path, 0) + (1 if o["failed"] else 0)
    lines = [f"sweep step {last}/{len(s['rates'])} at {level(next(iter(done[last].values())))}:"]
    for path, o in done[last].items():
        lines.append(f"  {path}: {o['achieved']['mean']:,.0f} req/s, p99 "
                     f"{o['p99']['mean'] if o['p99'] else float('nan'):.2f} ms: "
                     f"{'failed: ' + o['failed'] if o['failed'] else 'held'}")
    going = [p for p in done[last] if failures[p] < s["stop_after_failures"]]
    left = sorted(set(done[last]) - set(going))
    if left:
        lines.append(f"  leaving the sweep (failed {s['stop_after_failures']} steps): {', '.join(left)}")
    if last >= len(s["rates"]) or not going:
        return lines, None, []
    return lines, last + 1, going


def check(run_dir):
    """Merge the last step, judge it: (the lines to print, the next step's
    settings or None when the sweep is done)."""
    load = merge(run_dir, "s")
    lines, nxt, going = decide(load)
    return lines, ({"SWEEP_STEP": nxt, "PATHS": ",".join(going)} if nxt else None)


def knee(path, by_step):
    """The knee, monotone: the last rate the path held before the first step,
    rising, that it failed or where its pooled p99 passed KNEE_FACTOR times
    its pooled p99 at the lowest step it has one (with its interval). Also the
    first step it failed (rate, why, statuses) and where its p99 first passed
    the bound (rate, p99), if anywhere. Steps that were the generator's limit
    are not the path's: skipped."""
    pts = [o[path] for o in by_step.values() if path in o and not o[path]["generator"]]
    base = next((o["pooled_p99"] for o in pts if o["pooled_p99"] and not o["failed"]), None)
    held, passed, broke = None, None, False
    for o in pts:
        p99 = o["pooled_p99"]
        if not broke and base and p99 and p99["value"] > KNEE_FACTOR * base["value"]:
            passed, broke = (o["rate"], p99["value"]), True
        broke = broke or bool(o["failed"])
        if not broke and base:
            held = o["rate"]
    failed = next(((o["rate"], o["failed"], o["statuses"]) for o in pts if o["failed"]), None)
    return {"rate": held, "low_load_p99_ms": base and base["value"], "low_load_p99": base,
            "failed_at": failed, "p99_passed_at": passed}


def peak(path, by_step):
    """A sweep of connections: the most requests/s the path carried and at how
    many connections, and the first step it failed (connections, why, what)."""
    pts = [o[path] for o in by_step.values() if path in o and not o[path]["generator"]]
    top = max(pts, key=lambda o: o["achieved"]["mean"], default=None)
    bad = next((o for o in pts if o["failed"]), None)
    return {"rps": top and top["achieved"]["mean"], "connections": top and top["connections"],
            "failed_at": bad and (bad["connections"], bad["failed"], bad["statuses"])}


def savings(load):
    """{step: [(term, figure)]}: the answer's same-nginx pairs at each step. At
    a fixed rate the client median's difference (TCP minus the socket, µs):
    paired second by second in the step's interleaved stream where it has one
    (as make load's answer), else over its rounds; flat out (a sweep of
    connections) the ratio of requests/s (the socket's to TCP's) over rounds.
    Not yet corrected: build() judges every step's pairs together."""
    flat = load["settings"].get("sweep") == "connections"
    out = {}
    for p in measured(load):
        v = rps(p) if flat else (p.get("duration_ms") or {}).get("p50")
        out.setdefault(p["step"], {}).setdefault(p["path"], {})[p["round"]] = v
    mixed = {} if flat else streams(load)
    res = {}
    for step in sorted(set(out) | set(mixed)):
        stream = mixed.get(step)
        by_path = mix_blocks(stream) if stream else out[step]
        chosen = [t for t in TERMS if t.get("answer") and all(x in by_path for x in t["paths"])
                  and not stood_in_for(t, by_path.__contains__)]
        if flat:
            figs = [ratio_stats(by_path[t["paths"][1]], by_path[t["paths"][0]]) for t in chosen]
        elif stream:
            figs = [block_diff(by_path, *t["paths"], scale=1e3, block_s=stream.get("block_s", 1)) for t in chosen]
        else:
            figs = [diff_stats(by_path[t["paths"][0]], by_path[t["paths"][1]], 1e3) for t in chosen]
        res[step] = list(zip(chosen, figs))
    return res


def build(load, server=None, generator_cpus=None, server_missing=None, backlog=None):
    """A sweep run's report.json. server: {phase name: server figures} (the
    report's phase figures), server_missing: why there are none; backlog: the
    app's listen backlog and where it came from, or None."""
    by_step = steps(load, server, generator_cpus)
    paths = list(dict.fromkeys(p for o in by_step.values() for p in o))
    flat = load["settings"].get("sweep") == "connections"
    mixed = streams(load)
    failed = step_failures(load) if flat else {}
    saved = {str(s): [{"term": t["key"], "pair": t["paths"], "handling": t["answer"],
                       ("ratio" if flat else "diff_us"): d,
                       "past_limit": [] if flat else past_limit(t["paths"], by_step.get(s, {}), mixed.get(s)),
                       "failed": failed_phrase(t, failed[s]) if flat else None}
                      for t, d in pairs]
             for s, pairs in savings(load).items()}
    # Every step's pairs are the sweep's answer: judged together (Holm), the
    # pairs not compared (a path past its limit, or failing) left out of the family.
    holm([x.get("diff_us", x.get("ratio")) for xs in saved.values() for x in xs if compared(x)])
    return {"testid": load["testid"], "mode": "sweep", "settings": load["settings"],
            "generator": load["settings"]["generator"], "server_missing": server_missing, "backlog": backlog,
            "steps": {str(s): o for s, o in by_step.items()},
            "knees": {} if flat else {p: knee(p, by_step) for p in paths},
            "peaks": {p: peak(p, by_step) for p in paths} if flat else {},
            "savings": saved,
            "charts": [], "warnings": all_short(by_step, load["settings"]["workloads"][0], load["settings"]["generator"])}


def step_failures(load):
    """{step: breakdown.failures_of its measured phases}: flat out, a pair with
    a path past MAX_FAILED_SHARE gets no ratio (it fails fast, so it carries
    more requests/s), the rule and words of make load's and make max's answer."""
    by_step = {}
    for p in measured(load):
        by_step.setdefault(p["step"], []).append(p)
    return {s: failures_of(ps) for s, ps in by_step.items()}


def compared(x):
    """Whether a step's pair was compared: neither past its limit nor failing."""
    return not x["past_limit"] and not x.get("failed")


def past_limit(pair, outcome, stream):
    """What of a pair was past its limit at a step (its latency there a queue's,
    not a cost): a path that failed the step alone, or the step's stream."""
    out = [p for p in pair if (outcome.get(p) or {}).get("failed")]
    return out + (["the interleaved stream"] if stream and not stream_held(stream) else [])


def all_short(by_step, load_workload=None, gen="k6"):
    """The steps where every path (two or more) fell short of the rate with no
    errors and nothing tells the generator's ceiling from theirs. A path's
    shortfall is its own where its generator sent the step on time
    (openloop: to 5% late), or where the generator's CPU (cAdvisor) stayed
    under 90% of its limit while every connection of the path's pool was
    busy (an overflow: each request in flight waited on the path)."""
    out = []
    for step, outcome in by_step.items():
        os_ = [o for o in outcome.values() if not o["generator"]]
        told = all(paths_limit(o) for o in os_)
        if len(os_) > 1 and not told and all(o["failed"] and (o["error_share"] or 0) <= MAX_ERRORS for o in os_):
            why = (f"with cAdvisor up, {gen}'s CPU tells" if any(o["generator_cpu_share"] is None for o in os_)
                   else f"{gen} sent late under 90% of its CPU, and no path had all its connections busy")
            out.append(warning(
                "all_short", f"at {level(os_[0])} every path fell short of the rate at once, none with errors: "
                f"{gen}'s own ceiling on its core is as likely as the paths' ({why})", [], load_workload))
    return out


def paths_limit(o):
    """Whether a path's step says the shortfall was the path's, not its generator's (all_short)."""
    on_time = o["late_share"] is not None and o["late_share"] <= MAX_LATE_SHARE
    return on_time or (o["generator_cpu_share"] is not None and o["dropped"] > 0)
