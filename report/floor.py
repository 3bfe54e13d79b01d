"""The transports alone (make floor, services/floor): what a round trip and a
new connection cost over the socket, TCP on loopback and TCP across the
bridge, with nothing on top; and, in a run of the paths, how much of that
difference is left once nginx and HTTP are in between.

floor.json (written by the floor client) has, per phase, a transport's
round trips of one message size on one connection (measure "rtt") or its new
connections, each a connect, a 1-byte exchange and a close ("connect"):
their count, p50, p99 and mean in µs. The comparisons are catalogue.json's
floor.comparisons, paired round by round like the paths': a ratio of the
p50s (how many times the first transport's time is the second's) with a
t-interval on the log ratios, and the difference in µs; all of a run's
comparisons are judged together with Holm's correction."""
import json
from pathlib import Path

from report import machine_state
from report.breakdown import by_round as paths_by_round
from report.verdicts import lost_to_holm
from report.lab import CATALOGUE, TERMS
from report.stats import diff_stats, fmt_interval, has_interval, holm, judge, ratio_stats, significant
from report.values import ReportError

FLOOR = CATALOGUE["floor"]


def measure_name(p):
    """A phase's measure as the report names it: "rtt-<size>" or "connect"."""
    return "connect" if p["measure"] == "connect" else f"rtt-{p['size']}"


def by_round(floor):
    """{transport: {measure name: {round: p50 µs}}} of the measured phases."""
    out = {}
    for p in floor["phases"]:
        if p["round"] > 0 and p.get("p50_us") is not None:
            out.setdefault(p["transport"], {}).setdefault(measure_name(p), {})[p["round"]] = p["p50_us"]
    return out


def measures(floor):
    """The run's measures in plan order: the round trips by size, then connect."""
    sizes = floor["settings"].get("sizes") or sorted({p["size"] for p in floor["phases"] if p["measure"] == "rtt"})
    return [f"rtt-{n}" for n in sizes] + ["connect"]


def summary(floor):
    """Per transport and measure: the means over rounds of p50, p99 and ops/s,
    and the errors."""
    out = {}
    for p in floor["phases"]:
        if p["round"] == 0:
            continue
        e = out.setdefault(p["transport"], {}).setdefault(measure_name(p), {"p50": [], "p99": [], "ops_per_s": [], "errors": 0})
        for k, src in (("p50", "p50_us"), ("p99", "p99_us"), ("ops_per_s", "ops_per_s")):
            if p.get(src) is not None:
                e[k].append(p[src])
        e["errors"] += p.get("errors", 0)
    order = floor["settings"].get("transports") or list(out)
    return {t: {m: {k: (sum(v) / len(v) if v else None) if isinstance(v, list) else v for k, v in e.items()}
                for m, e in sorted(out[t].items(), key=lambda kv: measures(floor).index(kv[0]))}
            for t in order if t in out}


def comparisons(floor):
    """Each catalogue comparison whose transports ran, per measure: the ratio
    first/second of the p50s and the difference first - second in µs."""
    rounds = by_round(floor)
    out = []
    for c in FLOOR["comparisons"]:
        a, b = c["paths"]
        if a not in rounds or b not in rounds:
            continue
        for m in measures(floor):
            if m in rounds[a] and m in rounds[b]:
                out.append({"key": c["key"], "label": c["label"], "first": a, "second": b, "measure": m,
                            "ratio": ratio_stats(rounds[a][m], rounds[b][m]),
                            "diff": diff_stats(rounds[a][m], rounds[b][m])})
    holm([x["ratio"] for x in out])
    return out


def in_words(m):
    if m == "connect":
        return "a new connection (connect, 1-byte exchange, close)"
    n = int(m.split("-")[1])
    size = f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} B"
    return f"a {size} round trip on one connection"


def sentence(x):
    """One comparison in words, a number only where it is measurable."""
    r, d, a, b = x["ratio"], x["diff"], x["first"], x["second"]
    if r is None or d is None:
        return f"{in_words(x['measure'])}: n/a"
    base = f"{in_words(x['measure'])} took {d['b_mean']:,.1f} µs over {b} and {d['a_mean']:,.1f} µs over {a}"
    status = judge(r)
    if status == "single":
        return f"{base}: 1 round, no interval, no verdict"
    if status == "straddles" and lost_to_holm(r):
        return (f"{base}: no measurable difference once the run's comparisons are judged together "
                f"({fmt_interval(r, times=True)} alone)")
    if status == "straddles":
        return f"{base}: no measurable difference ({fmt_interval(r, times=True)})"
    more = "more" if d["mean"] >= 0 else "less"
    return (f"{base}: {a}'s is {r['mean']:.2f}x ({fmt_interval(r, times=True)}), {abs(d['mean']):,.1f} µs {more} "
            f"({fmt_interval(d, 'µs')})")


def build(floor, compose=None):
    """What report.json holds of a floor run."""
    s = floor["settings"]
    services = (compose or {}).get("services") or {}
    placement = {name: (services.get(name) or {}).get("cpuset") or "any" for name in ("floor", "floor-near", "floor-far")}
    return {"testid": floor["testid"], "settings": s, "start_ms": floor["start_ms"], "summary": summary(floor),
            "comparisons": comparisons(floor), "cpusets": placement}


def answer_lines(f):
    lines = []
    for c in FLOOR["comparisons"]:
        xs = [x for x in f["comparisons"] if x["key"] == c["key"]]
        if xs:
            lines.append(f"**{c['label'][0].upper()}{c['label'][1:]}**: " + "; ".join(sentence(x) for x in xs) + ".")
    return lines


def render(f):
    """report.md of a floor run."""
    s = f["settings"]
    lines = [f"# uds-lab floor: run `{f['testid']}`", "", "## The answer", ""]
    lines += [x for line in answer_lines(f) for x in (line, "")]
    lines += [f"Each figure is the mean over {s['rounds']} rounds of a phase's median; each interval a 95% paired "
              "t-interval over rounds (ratios on the log scale), all comparisons judged together (Holm's correction). "
              "These hold for this machine and these CPU sets only.", "",
              "## Per transport", "",
              "| transport | measure | p50 (µs) | p99 (µs) | operations/s | errors |",
              "| --- | --- | ---: | ---: | ---: | ---: |"]
    for t, ms in f["summary"].items():
        for m, e in ms.items():
            cell = lambda v, d=1: "n/a" if v is None else f"{v:,.{d}f}"  # noqa: E731
            lines.append(f"| {t} | {m} | {cell(e['p50'])} | {cell(e['p99'])} | {cell(e['ops_per_s'], 0)} | {e['errors']} |")
    cs = f["cpusets"]
    lines += ["", "## How it ran", "",
              f"- Transports: " + ", ".join(f"{t} (`{FLOOR['transports'][t]['address']}`: {FLOOR['transports'][t]['about']})"
                                            for t in s["transports"]),
              f"- {s['rounds']} rounds of {s['duration']} s per measure, order of transports counterbalanced "
              f"(SEED={s['seed']}), {s['warmup']} s warm-up per transport; a connect phase stops after "
              f"{s['connects']:,} connections (TIME_WAIT must not exhaust the ephemeral ports)",
              f"- CPU sets: client {cs['floor']}, servers {cs['floor-near']} (near), {cs['floor-far']} (far)",
              "- Latencies are the client's, per operation (Go's monotonic clock); p50 and p99 nearest-rank per phase.",
              f"- {machine_state.line(f.get('machine_state'))}",
              ""]
    return "\n".join(lines)


def newest(results_dir):
    """The newest floor run under results_dir (by its start), or None."""
    best = None
    for path in Path(results_dir).glob("*/floor.json"):
        try:
            doc = json.loads(path.read_text())
        except ValueError:
            continue
        if best is None or doc.get("start_ms", 0) > best.get("start_ms", 0):
            best = doc
    return best


def through_nginx(term, wl, rounds, settings):
    """The same comparison through nginx in a run of the paths: flat out, the
    ratio of requests/s; at a fixed rate, the client median's difference
    (the breakdown's, a difference in differences where the term has one)."""
    slow, fast = term["paths"]
    if slow not in rounds or fast not in rounds:
        return "not measured in this run"
    figures = ((wl.get("breakdown") or {}).get(term["key"]) or {}).get("figures", {})
    if settings.get("mode") == "max":
        # The report's own ratio, judged with the rest of it; computed here only for a breakdown without one.
        r = figures.get("rps") or ratio_stats(rounds[fast].get("rps", {}), rounds[slow].get("rps", {}))
        if not r or not has_interval(r):
            return "n/a (fewer than 2 rounds, or rounds all equal)"
        across = " (across two nginx, the two nginx's own difference not removed)" if term.get("less") else ""
        if not significant(r):
            return f"`{fast}` against `{slow}`{across}: no measurable difference ({fmt_interval(r, times=True)})"
        return f"`{fast}` carried {r['mean']:.2f}x the requests/s of `{slow}`{across} ({fmt_interval(r, times=True)})"
    d = figures.get("client_p50_ms")
    if not d or not has_interval(d):
        return "n/a (fewer than 2 rounds, rounds all equal, or a path missing)"
    if not significant(d):
        return f"{term['label']}: no measurable difference on the client's median ({fmt_interval(d, 'µs', 0)})"
    return f"{term['label']}: {d['mean']:,.0f} µs on the client's median ({fmt_interval(d, 'µs', 0)})"


def beside_paths(f, workloads, phases, settings):
    """Per workload with a floor_size: the floor's comparison beside the same
    comparison through nginx (its catalogue term), as lines for the report."""
    if f is None:
        return ["No `make floor` run in results/: run it to see the transports' own difference beside this one."]
    lines = [f"From floor run `{f['testid']}` ({f['settings']['rounds']} rounds): each pair of transports alone "
             "(how many times the first's time is the second's), then the same pair through nginx in this run.", ""]
    terms = {t["key"]: t for t in TERMS}
    for w, wl in workloads.items():
        size = CATALOGUE["workloads"].get(w, {}).get("floor_size")
        if size is None:
            lines.append(f"- `{w}`: catalogue.json gives this workload no floor size: nothing to set beside it")
            continue
        rounds = paths_by_round(phases, w)
        for c in FLOOR["comparisons"]:
            xs = {x["measure"]: x for x in f["comparisons"] if x["key"] == c["key"]}
            term = terms.get(c["term"])
            if not xs or term is None:
                continue
            alone = "; ".join(f"{what} {x['ratio']['mean']:.2f}x ({fmt_interval(x['ratio'], times=True)})"
                              for what, x in (("round trip", xs.get(f"rtt-{size}")), ("new connection", xs.get("connect")))
                              if x and x["ratio"] and x["ratio"]["rounds"] >= 2)
            lines.append(f"- `{w}` ({size:,} B), {c['label']}: alone, {alone or 'n/a'}; through nginx, "
                         f"{through_nginx(term, wl, rounds, settings)}")
    return lines


def read_floor(path):
    try:
        doc = json.loads(Path(path).read_text())
    except ValueError as e:
        raise ReportError(f"{path} is not valid JSON: {e}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("phases"), list) or "settings" not in doc:
        raise ReportError(f"{path}: not a floor run's floor.json (written by services/floor)")
    return doc
