"""make sweep's report in words (pure, but the chart): what the socket saved
at each step, where each path bends and breaks, every step's figures, and
the chart of latency against load, from sweep.build()'s report."""
from pathlib import Path

from report import machine_state
from report.lab import PATH_COLOURS
from report.stats import fmt_interval, judge, measurable
from report.sweep import KNEE_FACTOR, MAX_ERRORS, MIN_HELD, compared
from report.verdicts import lost_to_holm
from report.words import HANDLING

# What k6 counted of a failing step (load.js's FAILING), in words; "0" (no
# response) counts the kinds after it, and any other network error.
STATUS_WORDS = {"502": "502 (nginx could not reach the app)", "503": "503", "504": "504 (the app timed out)",
                "0": "no response", "refused": "refused", "reset": "reset", "timeout": "timed out",
                "connect_timeout": "connect timed out"}


# Knees are read on the sweep's grid of steps from point values (each p99
# against the bound), so two paths' knees are not a comparison: identical
# paths' knees differed in a quarter of steep simulated sweeps (issue 39's
# audit). Said above the knees, which are never compared between paths.
KNEE_CAVEAT = ("Each knee is a point estimate on this sweep's steps, not a comparison: two paths' knees can differ "
               "by a step with no difference between the paths (identical paths' did in about a quarter of steep "
               "sweeps); what the socket saved at a rate is the answer's, above, with its interval.")


def fmt_ms(d, decimals=2):
    """A figure over rounds: mean (95% interval), or why not."""
    if d is None:
        return "n/a"
    if d["lo"] is None:
        return f"{d['mean']:,.{decimals}f} ({'1 round' if d['rounds'] < 2 else 'no spread'})"
    return f"{d['mean']:,.{decimals}f} ({d['lo']:,.{decimals}f} to {d['hi']:,.{decimals}f})"


def saving_words(x):
    """One pair at one step in words, or None when it was not measured."""
    tcp, uds = x["pair"]
    words = HANDLING[x["handling"]].removeprefix("with ")
    if "ratio" in x:  # flat out: requests/s
        r = x["ratio"]
        if r is None:
            return None
        if x.get("failed"):
            return x["failed"]
        if lost_to_holm(r):
            return (f"`{uds}` against `{tcp}` ({words}): no measurable difference once the pairs are judged "
                    f"together ({fmt_interval(r, times=True)} alone)")
        if judge(r) != "clear":
            return f"`{uds}` against `{tcp}` ({words}): no measurable difference ({fmt_interval(r, times=True)})"
        return f"`{uds}` carried {r['mean']:.2f}x the requests/s of `{tcp}` ({words}; {fmt_interval(r, times=True)})"
    d = x["diff_us"]
    if d is None:
        return None
    if x.get("past_limit"):  # latency there is a queue's (k6's or the path's), not a cost
        return (f"`{uds}` against `{tcp}` ({words}): not compared, {' and '.join(x['past_limit'])} past "
                f"{'its' if len(x['past_limit']) == 1 else 'their'} limit at this rate (latency is the queue there)")
    if lost_to_holm(d):
        return (f"`{uds}` against `{tcp}` ({words}): no measurable difference once the pairs are judged together "
                f"({fmt_interval(d, 'µs', 0)} alone)")
    if not measurable(d):
        return f"`{uds}` against `{tcp}` ({words}): no measurable difference ({fmt_interval(d, 'µs', 0)})"
    verb = "saved" if d["mean"] > 0 else "cost"
    return (f"`{uds}` against `{tcp}` ({words}) {verb} {abs(d['mean']):,.0f} µs "
            f"({abs(d['relative']):.0%} of {tcp}'s median; {fmt_interval(d, 'µs', 0)})")


def saving_method(rep):
    """How the savings were paired, in words."""
    s = rep["settings"]
    if s.get("sweep") == "connections":
        return f"Requests/s flat out (ratios: geometric means), paired over {s['rounds']} rounds a step"
    blocks = [x["diff_us"] for xs in rep["savings"].values() for x in xs if x.get("diff_us") and x["diff_us"].get("blocks")]
    if not blocks:
        return f"Client median ({rep['generator']}'s own), paired over {s['rounds']} rounds a step"
    return (f"Client median ({rep['generator']}'s own), paired second by second in each step's interleaved stream of "
            f"its paths at its rate ({blocks[0]['blocks']} blocks of {blocks[0]['block_s']} s, a t-interval with an "
            f"equal-weighted cosine standard error on {blocks[0]['dof']} degrees of freedom, the 1 s differences' "
            "lag-1 autocorrelation at most "
            f"{max(d['autocorrelation_blocks'] for d in blocks):.2f}); each path alone after it, {s['rounds']} rounds "
            "a step, for where it bends and breaks")


def failure_words(failed_at, unit):
    at, why, statuses = failed_at
    kinds = ", ".join(f"{n:,} {STATUS_WORDS.get(st, st)}" for st, n in statuses.items() if n)
    return f"first failed at {at:,} {unit}: {why}" + (f" ({kinds})" if kinds else "")


def nearest(rep, rate):
    """The measured step nearest to a rate (make report RATE=...), in words."""
    if rep["settings"].get("sweep") == "connections":
        return "RATE: this sweep stepped connections, not rates: no step at a rate"
    rates = rep["settings"]["rates"]
    step = min(range(len(rates)), key=lambda i: abs(rates[i] - rate))
    said = [w for w in map(saving_words, rep["savings"].get(str(step + 1), [])) if w]
    return (f"At your rate ({rate:,} req/s) the nearest measured step is {rates[step]:,} req/s: "
            + ("; ".join(said) if said else "no same-nginx pair measured there") + ".")


def render(rep, rate=None):
    """A sweep's report.md: the answer (what the socket saved at each step), where each path bends and breaks,
    every step's figures, the warnings and how to read it."""
    s = rep["settings"]
    w = s["workloads"][0]
    flat = s.get("sweep") == "connections"
    unit = "connections" if flat else "req/s"
    lines = [f"# uds-lab sweep: run `{rep['testid']}`", "", "## The answer", ""]
    if rate:
        lines += [nearest(rep, rate), ""]
    for step, pairs in rep["savings"].items():
        parts = [x for x in map(saving_words, pairs) if x]
        if parts:
            lines.append(f"- **{s['rates'][int(step) - 1]:,} {unit}**: " + "; ".join(parts) + ".")
    if not any(rep["savings"].values()):
        lines.append("This sweep did not measure the socket and TCP through the same nginx (PATHS needs a pair of "
                     "catalogue.json's answer terms, e.g. tcp-lo and uds-lo): no answer to give.")
    family = sum(1 for xs in rep["savings"].values() for x in xs if compared(x))
    lines += ["", f"{saving_method(rep)}; every step's pairs judged together (Holm's correction over the {family} "
              "compared). A step the generator could not drive is shown as its limit, not as the path's figure.", ""]
    if rep.get("backlog"):
        lines += [f"The app's listen backlog: {rep['backlog']}.", ""]
    lines += [machine_state.line(rep.get("machine_state")) + ".", ""]
    lines += knee_lines(rep, unit)
    lines += step_lines(rep, w, flat)
    if rep.get("server_missing"):
        lines += ["", f"Server figures: n/a ({rep['server_missing']})."]
    for c in rep["charts"]:
        lines += ["", f"![{c['title']}]({c['file']})"]
    lines += ["", "## Warnings", ""] + [f"- **{x['kind']}**: {x['message']}." for x in rep["warnings"]] + \
        (["- none"] if not rep["warnings"] else [])
    lines += how_to_read_lines(rep, flat)
    return "\n".join(lines)


def knee_lines(rep, unit):
    """Where each path bends and breaks: its knee (a sweep of rates) or its peak (of connections)."""
    lines = ["## Where each path bends and breaks", ""]
    if rep["knees"]:
        lines += [KNEE_CAVEAT, ""]
    for path, k in rep["knees"].items():
        b = k["low_load_p99"]
        held = (f"held up to {k['rate']:,} req/s with its p99 within {KNEE_FACTOR}x its p99 at the lowest rate "
                f"({b['value']:.2f} ms, 95% CI {b['lo']:.2f} to {b['hi']:.2f}, of its {b['requests']:,} requests "
                "there)") if k["rate"] else "held no step within its p99 bound"
        past = (f"; its p99 passed that bound at {k['p99_passed_at'][0]:,} req/s ({k['p99_passed_at'][1]:.2f} ms)"
                if k.get("p99_passed_at") else "")
        lines.append(f"- `{path}`: {held}{past}" + (f"; {failure_words(k['failed_at'], unit)}" if k["failed_at"] else "")
                     + ".")
    for path, k in rep["peaks"].items():
        top = f"carried at most {k['rps']:,.0f} req/s, at {k['connections']:,} connections" if k["rps"] else \
            "no step of its own"
        lines.append(f"- `{path}`: {top}" + (f"; {failure_words(k['failed_at'], unit)}" if k["failed_at"] else
                                            "; no step failed") + ".")
    return lines


def step_lines(rep, w, flat):
    """Every step's figures, a row per path."""
    lines = ["", f"## Every step (`{w}`, ms over rounds, mean and 95% interval)", "",
              f"| {'connections' if flat else 'rate'} | path | {'' if flat else 'achieved '}req/s | p50 | p90 | p99 | "
              "p99.9 | failed | dropped | app CPU/req (µs) | nginx CPU/req (µs) | nginx 5xx | generator | verdict |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for step, outcome in rep["steps"].items():
        for path, o in outcome.items():
            err = "n/a" if o["error_share"] is None else f"{o['error_share']:.2%}"
            verdict = (f"the generator's limit, not the path's: {o['generator']}" if o["generator"]
                       else f"failed: {o['failed']}" if o["failed"]
                       else f"held (not clearly failed: {o['borderline']})" if o.get("borderline") else "held")
            lines.append(f"| {o['connections' if flat else 'rate']:,} | {path} | {fmt_ms(o['achieved'], 0)} | "
                         f"{fmt_ms(o['p50'])} | {fmt_ms(o['p90'])} | {fmt_ms(o['p99'])} | {fmt_ms(o['p999'])} | {err} | "
                         f"{o['dropped']:,} | {fmt_ms(o['app_cpu_us_per_req'], 1)} | "
                         f"{fmt_ms(o['nginx_cpu_us_per_req'], 1)} | {fmt_ms(o['nginx_5xx'], 0)} | "
                         f"{generator_cell(o)} | {verdict} |")
    return lines


def generator_cell(o):
    """How the generator kept up at a step: the share it sent over 1 ms late (the worse round's; openloop) and
    its CPU, a share of its limit (cAdvisor's mean over rounds)."""
    parts = ([f"{o['late_share']:.1%} late"] if o.get("late_share") is not None else []) + \
        ([f"CPU {o['generator_cpu_share']:.0%}"] if o.get("generator_cpu_share") is not None else [])
    return ", ".join(parts) or "n/a"


def how_to_read_lines(rep, flat):
    """A sweep's "How to read this": its rule for a failed step, and its knee or its limit."""
    s = rep["settings"]
    rule = (f"more than {MAX_ERRORS:.0%} of its requests failed" if flat else
            f"more than {MAX_ERRORS:.0%} of its requests failed or it held less than {MIN_HELD:.0%} of the rate")
    rule += (" (judged on 95% intervals: the failed share's, Clopper-Pearson over the step's requests, and the "
             "requests/s's over its rounds; where the rate has no interval, one run's figure against the threshold, "
             "said so)")
    return ["", "## How to read this", "",
              ("- Each step runs every path flat out with that many connections in flight (no rate to hold): "
               "requests/s is the path's limit there, latency its queue. " if flat else
               f"- Each step holds a fixed arrival rate ({rep['generator']}'s: a slow server cannot slow the "
               "clock). ")
              + f"A path fails a step when {rule}; it leaves the sweep once it has failed {s['stop_after_failures']} "
              "steps. When the generator itself cannot keep up, every path falls short at once: read that step as "
              "its limit, not the paths'.",
              ("- nginx answers 503 itself beyond NGINX_MAX_IN_FLIGHT requests in flight: a step past it shows "
               "nginx's limit on every path alike." if flat else
               f"- The knee: the last rate a path held, rising, before the first step it failed or where its p99 "
               f"passed {KNEE_FACTOR}x its p99 at the lowest rate. Each p99 is of the step's requests pooled over its "
               "rounds (read off the distribution the phases' quantiles give; its interval from order statistics, "
               "the requests taken as independent), not a mean of the phases' p99s."), ""]


def write_chart(rep, out_dir):
    """A sweep of rates: latency (p50 solid, p99 dashed, log scale) against
    achieved requests/s, a line per path in the catalogue's colours, knees
    marked, failed steps as crosses. A sweep of connections: requests/s and
    p99 against connections. Steps that were the generator's are left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    w = rep["settings"]["workloads"][0]
    flat = rep["settings"].get("sweep") == "connections"
    fig, axes = plt.subplots(1, 2 if flat else 1, figsize=(11 if flat else 8, 5), squeeze=False)
    paths = list(rep["peaks"] if flat else rep["knees"])
    for path in paths:
        pts = [o[path] for o in rep["steps"].values() if path in o and not o[path]["generator"]]
        colour = PATH_COLOURS.get(path, "grey")
        if flat:
            for ax, get in ((axes[0][0], lambda o: o["achieved"]), (axes[0][1], lambda o: o["p99"])):
                xy = [(o["connections"], get(o)["mean"]) for o in pts if get(o)]
                if xy:
                    ax.plot(*zip(*xy), "-", color=colour, marker="o", ms=3, label=path)
                bad = [(o["connections"], get(o)["mean"]) for o in pts if o["failed"] and get(o)]
                if bad:
                    ax.plot(*zip(*bad), "x", color=colour, ms=9)
            continue
        ax = axes[0][0]
        for q, style in (("p50", "-"), ("p99", "--")):
            xy = [(o["achieved"]["mean"], o[q]["mean"]) for o in pts if o[q]]
            if xy:
                ax.plot(*zip(*xy), style, color=colour, marker="o", ms=3, label=f"{path} {q}")
        bad = [(o["achieved"]["mean"], o["p99"]["mean"]) for o in pts if o["failed"] and o["p99"]]
        if bad:
            ax.plot(*zip(*bad), "x", color=colour, ms=9)
        at = next((o for o in pts if o["rate"] == rep["knees"][path]["rate"] and o["p99"]), None)
        if at:
            ax.plot(at["achieved"]["mean"], at["p99"]["mean"], "D", color=colour, ms=8, mfc="none")
    if flat:
        title = f"{w}: flat out against connections in flight (x: failed step)"
        for ax, label in ((axes[0][0], "requests/s"), (axes[0][1], "client p99 (ms, log)")):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("connections in flight")
            ax.set_ylabel(label)
        axes[0][1].set_yscale("log")
    else:
        title = f"{w}: latency against load (p50 solid, p99 dashed; diamond: knee, x: failed step)"
        axes[0][0].set_yscale("log")
        axes[0][0].set_xlabel("achieved requests/s")
        axes[0][0].set_ylabel("client latency (ms, log)")
    for ax in axes[0]:
        ax.grid(alpha=0.3, which="both")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, ncol=2)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fname = f"{w}-sweep.png"
    fig.savefig(Path(out_dir) / fname, dpi=100)
    plt.close(fig)
    return [{"workload": w, "file": fname, "title": title}]
