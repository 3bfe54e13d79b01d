"""Where the time goes (pure): catalogue.json's breakdown terms, one path's
figure minus another's round by round, and the answer in plain words."""
from report.lab import CATALOGUE
from report.stats import judge, ratio_stats
from report.values import div, generator, is_max, mean

# The cost breakdown (catalogue.json): each term is one path's figure minus
# another's, round by round (a path's round r against the other's round r, as
# the ratios).
TERMS = [(t["key"], t["label"], *t["paths"]) for t in CATALOGUE["breakdown"]["terms"]]
# The figures a term is given in: (key in METRICS, label, scale to the unit, unit).
TERM_FIGURES = [
    ("client_p50_ms", "client p50 latency", 1e3, "µs"),
    ("app_cpu_us_per_req", "app CPU per request", 1.0, "µs"),
    ("app_ctx_switches_per_req", "app context switches per request", 1.0, ""),
    ("nginx_cpu_us_per_req", "nginx CPU per request", 1.0, "µs"),
]


def diff_stats(a_by_round, b_by_round, scale=1.0):
    """Per-round difference a - b (times scale), then its mean, min and max, and
    the mean relative to b's mean; None when no round has both."""
    per_round = {r: scale * (a - b_by_round[r]) for r, a in sorted(a_by_round.items())
                 if a is not None and b_by_round.get(r) is not None}
    if not per_round:
        return None
    vs = list(per_round.values())
    a_mean = mean([scale * a_by_round[r] for r in per_round])
    b_mean = mean([scale * b_by_round[r] for r in per_round])
    m = sum(vs) / len(vs)
    return {"mean": m, "min": min(vs), "max": max(vs), "rounds": len(vs), "a_mean": a_mean, "b_mean": b_mean,
            "relative": div(m, b_mean), "per_round": {str(r): v for r, v in per_round.items()}}


def measurable(d):
    """Whether a difference's spread over rounds excludes zero (needs 2 rounds)."""
    return d is not None and d["rounds"] >= 2 and not (d["min"] <= 0 <= d["max"])


def by_round(phases, workload):
    """{path: {figure: {round: value}}} of one workload's measured phases."""
    out = {}
    for p in phases:
        if p["workload"] == workload:
            for k, v in p["figures"].items():
                out.setdefault(p["path"], {}).setdefault(k, {})[p["round"]] = v
    return out


def breakdown(phases, workload, figures=TERM_FIGURES):
    """Every term whose two paths were measured: its difference per figure."""
    rounds = by_round(phases, workload)
    out = {}
    for key, label, a, b in TERMS:
        if a in rounds and b in rounds:
            out[key] = {"label": label, "minuend": a, "subtrahend": b, "figures": {
                f: diff_stats(rounds[a].get(f, {}), rounds[b].get(f, {}), scale) for f, _, scale, _ in figures}}
    return out


def fmt_diff(d, unit="µs", share=True):
    """A difference as the report words it: a number only when it is measurable;
    share adds it as a share of the second path's figure."""
    if d is None:
        return "n/a"
    u = f" {unit}" if unit else ""
    rng = f"{d['min']:,.1f} to {d['max']:,.1f}{u}"
    if d["rounds"] < 2:
        return f"{d['mean']:,.1f}{u} (1 round: spread unknown)"
    if not measurable(d):
        return f"no measurable difference ({rng})"
    rel = f", {d['relative']:.0%}" if share and d.get("relative") else ""
    return f"{d['mean']:,.1f}{u} ({rng}{rel})"


def answer(w, phases, settings):
    """The answer for one workload, in plain words: what the socket saved against
    TCP over loopback and across the bridge, with and without keepalive, and why."""
    if is_max(settings):
        return max_answer(w, phases, settings)
    rounds = by_round(phases, w)
    route = next((p.get("endpoint") for p in phases if p["workload"] == w), None) or w
    at = f"at {settings['rate']} req/s" if settings.get("rate") else "at a fixed rate"

    def p50_diff(a, b):
        if a not in rounds or b not in rounds:
            return None
        return diff_stats(rounds[a].get("client_p50_ms", {}), rounds[b].get("client_p50_ms", {}), 1e3)

    def phrase(d, against):
        if d is None:
            return None
        if not measurable(d):
            return f"made no measurable difference against {against} ({d['min']:,.0f} to {d['max']:,.0f} µs over the rounds)"
        verb = "saved" if d["mean"] > 0 else "cost"
        share = div(d["mean"], d["a_mean"])  # of TCP's median
        pct = f" ({abs(share):.0%})" if share is not None else ""
        return f"{verb} {abs(d['mean']):,.0f} µs{pct} of median latency against {against}"

    sentences = []
    for kind, uds, lo, bridge in (("with a new connection per request", "uds", "tcp-lo", "tcp"),
                                  ("with pooled keepalive connections", "uds-ka", "tcp-lo-ka", "tcp-ka")):
        parts = [x for x in (phrase(p50_diff(lo, uds), "TCP over loopback"),
                             phrase(p50_diff(bridge, uds), "TCP across the Docker bridge")) if x]
        if parts:
            sentences.append(f"{kind[0].upper()}{kind[1:]}, the socket " + "; it ".join(parts) + ".")
    if not sentences:
        return (f"**`{w}`**: this run did not measure the socket and TCP with the same connection handling "
                "(PATHS needs uds with tcp or tcp-lo, or uds-ka with tcp-ka or tcp-lo-ka): no answer to give.")
    terms = breakdown(phases, w)
    why = []
    for key, text in (("tcp_connect", "a new TCP connection across the bridge costs"),
                      ("tcp_lo_connect", "over loopback"),
                      ("uds_connect", "a new socket connection"),
                      ("bridge_pooled", "the bridge on a pooled connection"),
                      ("control_new", "the two nginx (control, socket)")):
        d = (terms.get(key) or {}).get("figures", {}).get("client_p50_ms")
        if d is not None:
            why.append(f"{text} {fmt_diff(d, share=False)}")
    out = f"**`{w}`** (`{route}`), {at}: " + " ".join(sentences)
    if why:
        out += " Where the time goes (client median): " + "; ".join(why) + "."
    return out


def max_answer(w, phases, settings):
    """In max mode the answer is throughput: each socket path's requests/s against TCP's."""
    rounds = by_round(phases, w)
    parts = []
    for uds, tcps in (("uds", ("tcp-lo", "tcp")), ("uds-ka", ("tcp-lo-ka", "tcp-ka"))):
        for t in tcps:
            if uds in rounds and t in rounds:
                r = ratio_stats(rounds[uds].get("rps", {}), rounds[t].get("rps", {}))
                if r is None:
                    continue
                if judge(r) == "straddles":
                    parts.append(f"{uds} against {t}: no measurable difference ({r['min']:.2f}-{r['max']:.2f}x)")
                else:
                    parts.append(f"{uds} carried {r['mean']:.2f}x the requests/s of {t} ({r['min']:.2f}-{r['max']:.2f})")
    if not parts:
        return f"**`{w}`**: this run did not measure both the socket and TCP: no answer to give."
    return (f"**`{w}`**, each path flat out ({generator(settings)}, {settings.get('connections')} connections): "
            + "; ".join(parts) + ".")
