"""The PNG charts (matplotlib, imported only when they are drawn)."""
from pathlib import Path

from report.breakdown import TERM_FIGURES
from report.interleaved import QUANTILES
from report.stats import measurable
from report.lab import PATH_COLOURS
from report.values import is_max

def saved(plt, fig, out_dir, w, fname, title):
    """Writes a chart, its title above it, and says so as report.json's
    charts list it."""
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(Path(out_dir) / fname, dpi=100)
    plt.close(fig)
    return {"workload": w, "file": fname, "title": title}


def chart_specs(w, wl, settings=None):
    """Which per-round charts a workload gets: (file, title, [(metric, subplot
    title, unit)]), empty series left out. The costs always; the latency only
    where no interleaved stream gave the answer (INTERLEAVE=0), since the
    stream's charts show it where one did."""
    has = lambda k: any(e["mean"][k] is not None for e in wl["paths"].values())  # noqa: E731
    specs = []
    if is_max(settings or {}) and has("rps"):
        specs.append((f"{w}-throughput.png", f"{w}: requests/s per path at the limit (mean of rounds, bars: min-max)",
                      [("rps", "requests/s", "req/s")]))
    lat = [(k, t, "ms") for k, t in (("client_p50_ms", "client p50"), ("client_p99_ms", "client p99")) if has(k)]
    if lat and not wl.get("interleaved"):
        specs.append((f"{w}-latency.png", f"{w}: client latency per path (mean of rounds, bars: min-max)", lat))
    cost = [(k, t, "µs/request") for k, t in (("app_cpu_us_per_req", "app CPU"), ("nginx_cpu_us_per_req", "nginx CPU")) if has(k)]
    if cost:
        specs.append((f"{w}-cost.png", f"{w}: CPU per request (mean of rounds, bars: min-max)", cost))
    return specs


def term_bars(wl, key):
    """[(label, mean, lo, hi, measurable)] of the breakdown's terms for one
    figure: each term's difference with its 95% interval (lo = hi = mean
    with one round)."""
    bars = []
    for term in (wl.get("breakdown") or {}).values():
        d = term["figures"].get(key)
        if d is None:
            continue
        lo, hi = (d["lo"], d["hi"]) if d["rounds"] >= 2 else (d["mean"], d["mean"])
        bars.append((term["label"], d["mean"], lo, hi, measurable(d)))
    return bars


def write_breakdown_chart(plt, w, wl, out_dir):
    """Where the time goes: one horizontal bar per breakdown term and figure
    in µs, its mean difference with its 95% interval as whiskers, hatched
    where not measurable; None when no term was measured."""
    panels = [(label, term_bars(wl, f)) for f, label, _, unit in TERM_FIGURES if unit == "µs"]
    panels = [p for p in panels if p[1]]
    if not panels:
        return None
    rows = max(len(b) for _, b in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels) + 3, 0.5 * rows + 1.8), squeeze=False)
    for i, (ax, (label, bars)) in enumerate(zip(axes[0], panels)):
        ys = list(range(len(bars)))[::-1]
        for y, (_, m, lo, hi, ok) in zip(ys, bars):
            ax.barh(y, m, color="#5794F2" if ok else "#C8C8C8", hatch=None if ok else "//", edgecolor="white")
            if lo is not None:  # rounds that do not spread have no interval to draw
                ax.errorbar(m, y, xerr=[[m - lo], [hi - m]], color="black", capsize=4)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_yticks(ys, [b[0] for b in bars] if i == 0 else [""] * len(bars), fontsize=8)
        ax.set_title(label)
        ax.set_xlabel("µs (first path minus second)")
        ax.grid(axis="x", alpha=0.3)
    title = f"{w}: where the time goes (mean difference, whiskers: 95% interval; grey hatched: not measurable)"
    return saved(plt, fig, out_dir, w, f"{w}-breakdown.png", title)


def write_round_chart(plt, w, wl, fname, title, panels, out_dir):
    """One per-round chart: a horizontal bar per path (its name on the left,
    readable at any number of paths), the mean of its rounds, min-max bars."""
    paths = list(wl["paths"])
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels) + 1.5, 0.35 * len(paths) + 1.8), squeeze=False)
    for i, (ax, (key, sub, unit)) in enumerate(zip(axes[0], panels)):
        means = [wl["paths"][p]["mean"][key] for p in paths]
        ys = list(range(len(paths)))[::-1]
        widths = [m if m is not None else 0 for m in means]
        lo = [(m - wl["paths"][p]["min"][key]) if m is not None else 0 for p, m in zip(paths, means)]
        hi = [(wl["paths"][p]["max"][key] - m) if m is not None else 0 for p, m in zip(paths, means)]
        ax.barh(ys, widths, color=[PATH_COLOURS.get(p, "grey") for p in paths], xerr=[lo, hi], capsize=3)
        for y, m in zip(ys, means):
            if m is None:
                ax.text(0, y, " n/a", va="center")
        ax.set_yticks(ys, paths if i == 0 else [""] * len(paths))
        ax.set_title(sub)
        ax.set_xlabel(unit)
        ax.grid(axis="x", alpha=0.3)
    return saved(plt, fig, out_dir, w, fname, title)


def write_stream_chart(plt, w, wl, out_dir):
    """The interleaved stream second by second: each path's client median per
    block, one panel per stream (the pooled paths', the new connections'),
    the paths that the answer pairs moving together; None without a stream."""
    mix = wl.get("interleaved") or {}
    blocks = mix.get("blocks")
    if not blocks:
        return None
    streams = [(s["stream"] or "", s["paths"]) for s in mix.get("streams") or []] or [("", list(blocks))]
    fig, axes = plt.subplots(len(streams), 1, figsize=(10, 3.2 * len(streams) + 0.6), squeeze=False)
    for ax, (name, paths) in zip(axes[:, 0], streams):
        for p in paths:
            xs = [(i + 0.5) * mix["block_s"] for i, v in enumerate(blocks.get(p) or []) if v is not None]
            ys = [v for v in blocks.get(p) or [] if v is not None]
            ax.plot(xs, ys, color=PATH_COLOURS.get(p, "grey"), label=p, linewidth=1.2, marker=".", markersize=3)
        ax.set_title(f"the {name} paths' stream" if name else "the stream", fontsize=9)
        ax.set_ylabel("client median (ms)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, ncol=min(4, len(paths)), loc="upper right")
    axes[-1, 0].set_xlabel(f"seconds into the stream (one point per {mix['block_s']} s block)")
    title = f"{w}: each path's median, second by second, in the interleaved stream (the answer pairs these)"
    return saved(plt, fig, out_dir, w, f"{w}-stream.png", title)


# The answer chart's colours: the socket faster, slower, each paler where the
# difference lies inside the margin too, no difference (within the margin), not sure yet.
VERDICT_COLOURS = {"faster": "#3274D9", "slower": "#E02F44", "faster inside": "#8AB8FF", "slower inside": "#FF9AA5",
                   "same": "#73BF69", "unsure": "#A0A0A0"}


def verdict_kind(row):
    """An answer row's key in VERDICT_COLOURS."""
    if row["verdict"] != "differs":
        return row["verdict"]
    return ("faster" if row["saved_us"] > 0 else "slower") + (" inside" if row.get("inside_margin") else "")


def write_answer_chart(plt, w, wl, out_dir):
    """The answer: each comparison's saving (µs, the socket's against TCP's)
    with its 95% interval, the margin within which it is "no difference"
    shaded; None where no comparison has an interval."""
    parts = wl.get("answer_parts") or {}
    rows = [r for r in parts.get("rows") or [] if r["lo"] is not None]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(10, 0.7 * len(rows) + 1.6))
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows):
        m = r.get("margin_us") or 0
        if m:
            ax.fill_betweenx([y - 0.35, y + 0.35], -m, m, color="#E0E0E0", linewidth=0)
        colour = VERDICT_COLOURS.get(verdict_kind(r), "#A0A0A0")
        ax.errorbar(r["saved_us"], y, xerr=[[r["saved_us"] - r["lo"]], [r["hi"] - r["saved_us"]]], fmt="o",
                    color=colour, capsize=5, markersize=6)
    ax.axvline(0, color="black", linewidth=0.8)
    # The verdict in short (a "not sure yet" names the run that would decide in the table, not here).
    labels = [f"{r['pair'][0]} vs {r['pair'][1]} ({'pooled' if r['handling'] == 'pooled' else 'new connections'}): "
              f"{'not sure yet' if r['verdict'] == 'unsure' else r['words']}" for r in rows]
    ax.set_yticks(ys, labels, fontsize=8)
    ax.set_xlabel("µs the socket saved (below 0: it cost)")
    ax.grid(axis="x", alpha=0.3)
    title = (f"{w}: what the socket saved, with its 95% interval (grey: within ±{parts['margin_pct']:g}% of "
             "TCP's median; pale blue or red: a difference inside it)")
    return saved(plt, fig, out_dir, w, f"{w}-answer.png", title)


def write_percentile_chart(plt, w, wl, out_dir):
    """Each path's latency distribution over the stream, HdrHistogram style:
    latency against percentile, the percentile axis on a log scale of
    1/(1 - q) so that p50 to p99.9 are evenly apart; None without a stream."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    mix = wl.get("interleaved") or {}
    paths = {p: e.get("quantiles_ms") or {} for p, e in (mix.get("paths") or {}).items()}
    if not any(v is not None for q in paths.values() for v in q.values()):
        return None
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for p, qs in paths.items():
        pts = [(1 / (1 - QUANTILES[k]), v) for k, v in qs.items() if v is not None]
        if pts:
            ax.plot(*zip(*pts), color=PATH_COLOURS.get(p, "grey"), label=p, marker="o", markersize=3, linewidth=1.2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ticks = [1 / (1 - q) for q in QUANTILES.values()]
    ax.set_xticks(ticks, [f"p{100 * q:g}" for q in QUANTILES.values()])
    ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.minorticks_off()
    ax.set_xlabel("percentile")
    ax.set_ylabel("client latency (ms, log scale)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, ncol=2)
    title = f"{w}: each path's latency distribution in the interleaved stream (successful requests)"
    return saved(plt, fig, out_dir, w, f"{w}-percentiles.png", title)


def write_charts(rep, out_dir):
    """PNG charts per workload; returns [{workload, file, title}]: the
    answer, the stream and its percentiles first (rate mode), then the costs
    per round and where the time goes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for w, wl in rep["workloads"].items():
        if not is_max(rep["settings"]):
            for write in (write_answer_chart, write_stream_chart, write_percentile_chart):
                chart = write(plt, w, wl, out_dir)
                if chart:
                    written.append(chart)
        for fname, title, panels in chart_specs(w, wl, rep["settings"]):
            written.append(write_round_chart(plt, w, wl, fname, title, panels, out_dir))
        if not is_max(rep["settings"]):
            chart = write_breakdown_chart(plt, w, wl, out_dir)
            if chart:
                written.append(chart)
    return written
