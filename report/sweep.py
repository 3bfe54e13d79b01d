"""make sweep: latency against load, every path at rising fixed rates.

loadgen/run.sh runs the sweep a step at a time (plan.py's SWEEP_STEP, k6 at
the step's rate) and calls this between steps, in the report's image:

    python3 -m report.sweep --run <testid> --results results

It merges the step just run (load-s<N>.json) into load.json, judges each of
its paths, and prints one line per path, then `next <step> <paths>` or
`done`. A path fails a step when more than MAX_ERRORS of its requests failed
or it held less than MIN_HELD of the rate (as the mean over the step's
rounds); it leaves the sweep once it has failed the plan's
stop_after_failures steps, so a sweep past every limit stays bounded.

`make report` on a sweep run writes its report from load.json (k6's own
statistics) and, where Prometheus answers, each phase's server figures as a
run of make load has them: per step and path the achieved rate and the
client's p50, p90, p99 and p99.9 over rounds with their 95% intervals, what
failed and how, the app's and nginx's CPU per request and nginx's 5xx, what
the socket saved at each rate through the same nginx (paired rounds, as the
answer of make load), each path's knee and how it failed past it, and a chart
of latency against achieved load. A step whose generator used 90% or more of
its CPU limit is k6's, not the path's: said, and left out of the knee."""
import argparse
import json
import sys
from pathlib import Path

from report.breakdown import HANDLING
from report.lab import PATH_COLOURS, TERMS
from report.precision import merge
from report.stats import diff_stats, fmt_interval, holm, measurable, t_interval

MAX_ERRORS = 0.01  # a step fails past this share of failed requests
MIN_HELD = 0.95  # ... or below this share of its rate achieved
# The knee: the highest rate a path held while its p99 stayed within this many
# times its median at the sweep's first step.
KNEE_FACTOR = 10
# What k6 counted of a failing step (load.js's FAILING), in words; "0" (no
# response) counts the kinds after it, and any other network error.
STATUS_WORDS = {"502": "502 (nginx could not reach the app)", "503": "503", "504": "504 (the app timed out)",
                "0": "no response", "refused": "refused", "reset": "reset", "timeout": "timed out",
                "connect_timeout": "connect timed out"}


def measured(load):
    return [p for p in load["phases"] if p.get("round", 0) >= 1 and p.get("step")]


def rps(p):
    return p["requests"] / p["duration_s"] if p["duration_s"] else 0.0


def interval(values):
    """{mean, lo, hi, rounds} of a figure over rounds (None when no value)."""
    vs = [v for v in values if v is not None]
    if not vs:
        return None
    m, lo, hi, _ = t_interval(vs)
    return {"mean": m, "lo": lo, "hi": hi, "rounds": len(vs)}


# Server figures per step (the report's, per phase), over rounds.
SERVER = ("app_cpu_us_per_req", "nginx_cpu_us_per_req", "nginx_5xx", "k6_cpu_cores")
# k6 at or above this share of its CPU limit: the step describes k6.
MAX_K6_CPU_SHARE = 0.9


def step_outcome(phases, rate, server=None, k6_cpus=None):
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
        why = []
        if requests and failed / requests > MAX_ERRORS:
            why.append(f"{failed / requests:.1%} of requests failed")
        if achieved["mean"] < MIN_HELD * rate:
            why.append(f"held {achieved['mean']:,.0f} of {rate:,} req/s")
        figs = {k: interval([(server.get(p["name"]) or {}).get(k) for p in ps]) for k in SERVER}
        k6 = figs["k6_cpu_cores"]
        busy = k6_cpus and k6 and k6["mean"] >= MAX_K6_CPU_SHARE * k6_cpus
        out[path] = {
            "rate": rate, "achieved": achieved, "error_share": failed / requests if requests else None,
            "dropped": sum(p.get("dropped_iterations") or 0 for p in ps), "statuses": statuses,
            **{q: interval([(p.get("duration_ms") or {}).get(q) for p in ps]) for q in ("p50", "p90", "p99", "p999")},
            **figs,
            "failed": "; ".join(why) or None,
            "generator": f"k6 used {k6['mean']:.2f} of its {k6_cpus:g} CPUs" if busy else None,
        }
    return out


def steps(load, server=None, k6_cpus=None):
    """{step: step_outcome} of every step merged so far."""
    by_step = {}
    for p in measured(load):
        by_step.setdefault(p["step"], []).append(p)
    return {s: step_outcome(ps, ps[0]["rate"], server, k6_cpus) for s, ps in sorted(by_step.items())}


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
    lines = [f"sweep step {last}/{len(s['rates'])} at {s['rates'][last - 1]:,} req/s:"]
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
    """Merge the last step, judge it; the lines to print, the last one
    `next <step> <paths>` or `done`."""
    load = merge(run_dir, "s")
    lines, nxt, going = decide(load)
    return lines + ([f"next {nxt} {','.join(going)}"] if nxt else ["done"])


def knee(path, by_step):
    """The highest rate the path held with its p99 within KNEE_FACTOR times its
    first step's median, and the first step it failed (rate, why), if any."""
    first = next((o[path] for o in by_step.values() if path in o), None)
    base = first and first["p50"] and first["p50"]["mean"]
    held, failed = None, None
    for outcome in by_step.values():
        o = outcome.get(path)
        if o is None or o["generator"]:
            continue
        if o["failed"]:
            failed = failed or (o["rate"], o["failed"], o["statuses"])
        elif base and o["p99"] and o["p99"]["mean"] <= KNEE_FACTOR * base and not failed:
            held = o["rate"]
    return {"rate": held, "low_load_p50_ms": base, "failed_at": failed}


def savings(load):
    """{step: [(term, diff)]}: the answer's same-nginx pairs at each step, the
    client median's paired difference (TCP minus the socket, µs), Holm over
    the pairs of a step."""
    out = {}
    for p in measured(load):
        out.setdefault(p["step"], {}).setdefault(p["path"], {})[p["round"]] = (p.get("duration_ms") or {}).get("p50")
    res = {}
    for step, by_path in sorted(out.items()):
        pairs = [(t, diff_stats(by_path[t["paths"][0]], by_path[t["paths"][1]], 1e3)) for t in TERMS
                 if t.get("answer") and all(x in by_path for x in t["paths"])]
        holm([d for _, d in pairs])
        res[step] = pairs
    return res


def build(load, server=None, k6_cpus=None, server_missing=None):
    """A sweep run's report.json. server: {phase name: server figures} (the
    report's phase figures), server_missing: why there are none."""
    by_step = steps(load, server, k6_cpus)
    paths = list(dict.fromkeys(p for o in by_step.values() for p in o))
    return {"testid": load["testid"], "mode": "sweep", "settings": load["settings"], "generator": "k6",
            "server_missing": server_missing,
            "steps": {str(s): o for s, o in by_step.items()},
            "knees": {p: knee(p, by_step) for p in paths},
            "savings": {str(s): [{"term": t["key"], "pair": t["paths"], "handling": t["answer"], "diff_us": d}
                                 for t, d in pairs] for s, pairs in savings(load).items()},
            "charts": [], "warnings": all_short(by_step)}


def all_short(by_step):
    """The steps where every path (two or more) fell short of the rate with no
    errors: k6's own ceiling on its core is as likely as theirs, and without
    k6's CPU (cAdvisor) nothing tells them apart."""
    out = []
    for step, outcome in by_step.items():
        os_ = [o for o in outcome.values() if not o["generator"]]
        if len(os_) > 1 and all(o["failed"] and (o["error_share"] or 0) <= MAX_ERRORS for o in os_):
            out.append(f"at {os_[0]['rate']:,} req/s every path fell short of the rate at once, none with errors: "
                       "k6's own ceiling on its core is as likely as the paths' (with cAdvisor up, k6's CPU tells)")
    return out


def fmt_ms(d, decimals=2):
    """A figure over rounds: mean (95% interval), or why not."""
    if d is None:
        return "n/a"
    if d["lo"] is None:
        return f"{d['mean']:,.{decimals}f} (1 round)"
    return f"{d['mean']:,.{decimals}f} ({d['lo']:,.{decimals}f} to {d['hi']:,.{decimals}f})"


def render(rep):
    s = rep["settings"]
    w = s["workloads"][0]
    lines = [f"# uds-lab sweep: run `{rep['testid']}`", "", "## The answer", ""]
    for step, pairs in rep["savings"].items():
        rate = s["rates"][int(step) - 1]
        parts = []
        for x in pairs:
            d = x["diff_us"]
            tcp, uds = x["pair"]
            words = HANDLING[x["handling"]].removeprefix("with ")
            if d is None:
                continue
            if d["rounds"] < 2 or not measurable(d):
                ci = fmt_interval(d, "µs", 0)
                parts.append(f"`{uds}` against `{tcp}` ({words}): no measurable difference ({ci})")
            else:
                verb = "saved" if d["mean"] > 0 else "cost"
                parts.append(f"`{uds}` against `{tcp}` ({words}) {verb} {abs(d['mean']):,.0f} µs "
                             f"({abs(d['relative']):.0%} of {tcp}'s median; {fmt_interval(d, 'µs', 0)})")
        if parts:
            lines.append(f"- **{rate:,} req/s**: " + "; ".join(parts) + ".")
    if len(lines) == 4:
        lines.append("This sweep did not measure the socket and TCP through the same nginx (PATHS needs a pair of "
                     "catalogue.json's answer terms, e.g. tcp-lo and uds-lo): no answer to give.")
    lines += ["", f"Client median, k6's own, paired over {s['rounds']} rounds a step; the pairs of a step judged "
              "together (Holm's correction). A step k6 could not hold is shown as failed, not as the path's figure.", "",
              "## Where each path bends and breaks", ""]
    for path, k in rep["knees"].items():
        held = f"held up to {k['rate']:,} req/s with p99 within {KNEE_FACTOR}x its low-load median " \
               f"({k['low_load_p50_ms']:.2f} ms)" if k["rate"] else "held no step within its p99 bound"
        if k["failed_at"]:
            rate, why, statuses = k["failed_at"]
            kinds = ", ".join(f"{n:,} {STATUS_WORDS.get(st, st)}" for st, n in statuses.items() if n)
            held += f"; first failed at {rate:,} req/s: {why}" + (f" ({kinds})" if kinds else "")
        lines.append(f"- `{path}`: {held}.")
    lines += ["", f"## Every step (`{w}`, ms over rounds, mean and 95% interval)", "",
              "| rate | path | achieved req/s | p50 | p90 | p99 | p99.9 | failed | dropped | app CPU/req (µs) | "
              "nginx CPU/req (µs) | nginx 5xx | verdict |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for step, outcome in rep["steps"].items():
        for path, o in outcome.items():
            err = "n/a" if o["error_share"] is None else f"{o['error_share']:.2%}"
            verdict = (f"k6's limit, not the path's: {o['generator']}" if o["generator"]
                       else f"failed: {o['failed']}" if o["failed"] else "held")
            lines.append(f"| {o['rate']:,} | {path} | {o['achieved']['mean']:,.0f} | {fmt_ms(o['p50'])} | "
                         f"{fmt_ms(o['p90'])} | {fmt_ms(o['p99'])} | {fmt_ms(o['p999'])} | {err} | {o['dropped']:,} | "
                         f"{fmt_ms(o['app_cpu_us_per_req'], 1)} | {fmt_ms(o['nginx_cpu_us_per_req'], 1)} | "
                         f"{fmt_ms(o['nginx_5xx'], 0)} | {verdict} |")
    if rep.get("server_missing"):
        lines += ["", f"Server figures: n/a ({rep['server_missing']})."]
    for c in rep["charts"]:
        lines += ["", f"![{c['title']}]({c['file']})"]
    lines += ["", "## Warnings", ""] + [f"- {w}." for w in rep["warnings"]] + (["- none"] if not rep["warnings"] else [])
    lines += ["", "## How to read this", "",
              f"- Each step holds a fixed arrival rate (k6's constant-arrival-rate: a slow server cannot slow the "
              f"clock). A path fails a step when more than {MAX_ERRORS:.0%} of its requests failed or it held less "
              f"than {MIN_HELD:.0%} of the rate; it leaves the sweep once it has failed {s['stop_after_failures']} "
              "steps. When k6 itself cannot hold a rate, every path falls short at once: read that step as k6's "
              "limit, not the paths'.",
              f"- The knee: the highest rate a path held with its p99 within {KNEE_FACTOR}x its median at the "
              "first step.", ""]
    return "\n".join(lines)


def write_chart(rep, out_dir):
    """Latency (p50 solid, p99 dashed, log scale) against achieved requests/s,
    a line per path in the catalogue's colours, knees marked, failed steps as
    crosses."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for path, k in rep["knees"].items():
        pts = [o[path] for o in rep["steps"].values() if path in o and not o[path]["generator"]]
        colour = PATH_COLOURS.get(path, "grey")
        for q, style in (("p50", "-"), ("p99", "--")):
            xy = [(o["achieved"]["mean"], o[q]["mean"]) for o in pts if o[q]]
            if xy:
                ax.plot(*zip(*xy), style, color=colour, marker="o", ms=3, label=f"{path} {q}")
        bad = [(o["achieved"]["mean"], o["p99"]["mean"]) for o in pts if o["failed"] and o["p99"]]
        if bad:
            ax.plot(*zip(*bad), "x", color=colour, ms=9)
        at = next((o for o in pts if o["rate"] == k["rate"] and o["p99"]), None)
        if at:
            ax.plot(at["achieved"]["mean"], at["p99"]["mean"], "D", color=colour, ms=8, mfc="none")
    ax.set_yscale("log")
    ax.set_xlabel("achieved requests/s")
    ax.set_ylabel("client latency (ms, log)")
    ax.grid(alpha=0.3, which="both")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, ncol=2)
    title = (f"{rep['settings']['workloads'][0]}: latency against load (p50 solid, p99 dashed; "
             "diamond: knee, x: failed step)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fname = f"{rep['settings']['workloads'][0]}-sweep.png"
    fig.savefig(Path(out_dir) / fname, dpi=100)
    plt.close(fig)
    return [{"workload": rep["settings"]["workloads"][0], "file": fname, "title": title}]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True)
    ap.add_argument("--results", default="results")
    args = ap.parse_args(argv)
    run_dir = Path(args.results) / args.run
    if not (run_dir / "load.json").is_file():
        print(f"sweep: {run_dir / 'load.json'} not found", file=sys.stderr)
        return 2
    print("\n".join(check(run_dir)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
