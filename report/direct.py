"""The client straight to the app (pure): catalogue.json's direct paths (no
nginx, make max GENERATOR=oha), the experiment behind seed 000's "3x", set
beside the same pair through nginx-lo in the same run and rounds, with the
share of the direct gain that survives nginx."""
from report.breakdown import by_round
from report.lab import CATALOGUE, TERMS
from report.stats import fmt_interval, judge, no_interval, ratio_stats

DIRECT = CATALOGUE.get("direct") or {}
# Seed 000's figure, on its machine: Gin with RunUnix against TCP, wrk, no nginx.
SEED_000 = "seed 000 (Gin, wrk, no nginx, its own machine): 3.0x (48,710 against 16,230 req/s)"


def ratio(rounds, socket, tcp):
    """The socket path's requests/s over the TCP path's, round by round, or None."""
    if socket not in rounds or tcp not in rounds:
        return None
    return ratio_stats(rounds[socket].get("rps", {}), rounds[tcp].get("rps", {}))


def words(r):
    if r is None:
        return "not measured"
    if judge(r) == "single":
        return f"{r['mean']:.2f}x in its {no_interval(r)} (no interval)"
    if judge(r) != "clear":
        return f"no measurable difference ({fmt_interval(r, times=True)})"
    return f"{r['mean']:.2f}x ({fmt_interval(r, times=True)})"


def survives(direct, through):
    """The share of the direct gain left through nginx: (through - 1) / (direct - 1),
    where both are measurable gains."""
    if direct is None or through is None or judge(direct) != "clear" or judge(through) != "clear":
        return None
    if direct["mean"] <= 1:
        return None
    return (through["mean"] - 1) / (direct["mean"] - 1)


def straight_to_the_app(phases, workloads):
    """Per workload with both direct paths: the direct ratio, the same pair
    through nginx-lo (catalogue.json's direct.beside terms), the share of the
    gain that survives, and seed 000 beside them. {workload: {...}}."""
    if not DIRECT:
        return {}
    tcp, socket = DIRECT["pair"]
    out = {}
    for w in workloads:
        rounds = by_round(phases, w)
        direct = ratio(rounds, socket, tcp)
        if direct is None:
            continue
        beside = []
        for key in DIRECT["beside"]:
            t = next(t for t in TERMS if t["key"] == key)
            r = ratio(rounds, t["paths"][1], t["paths"][0])
            # The share that survives is of like for like: oha keeps its connections to the app open,
            # so only the pooled pair has no connection setup the direct paths lack.
            beside.append({"term": key, "pair": t["paths"], "handling": t["answer"], "ratio": r,
                           "survives": survives(direct, r) if t["answer"] == "pooled" else None})
        out[w] = {"ratio": direct, "beside": beside}
    return out


def rejudge(section):
    """The shares that survive, once the report's correction has judged the
    ratios (a gain that is not clear keeps no share)."""
    for d in section.values():
        for b in d["beside"]:
            b["survives"] = survives(d["ratio"], b["ratio"]) if b["handling"] == "pooled" else None
    return section


def lines(section):
    """The report's "Straight to the app" in words."""
    tcp, socket = DIRECT.get("pair", ("direct-tcp", "direct-uds"))
    out = []
    for w, d in section.items():
        parts = []
        for b in d["beside"]:
            kept = f"; {b['survives']:.0%} of the direct gain survives" if b["survives"] is not None else ""
            parts.append(f"{'pooled' if b['handling'] == 'pooled' else 'new connections'} "
                         f"(`{b['pair'][1]}` against `{b['pair'][0]}`) {words(b['ratio'])}{kept}")
        direct = (f"`{socket}` carried {words(d['ratio'])} the requests/s of `{tcp}`" if judge(d["ratio"]) == "clear"
                  else f"`{socket}` against `{tcp}`: {words(d['ratio'])}")
        out.append(f"- `{w}`: straight to the app, {direct}; through nginx-lo, {'; '.join(parts)}. Beside it, {SEED_000}.")
    return out
