"""The PNG charts (matplotlib, imported only when they are drawn)."""
from pathlib import Path

from report.breakdown import TERM_FIGURES, measurable
from report.lab import PATH_COLOURS
from report.values import is_max

def chart_specs(w, wl, settings=None):
    """Which charts a workload gets: (file, title, [(metric, subplot title, unit)]), empty series left out."""
    has = lambda k: any(e["mean"][k] is not None for e in wl["paths"].values())  # noqa: E731
    specs = []
    if is_max(settings or {}) and has("rps"):
        specs.append((f"{w}-throughput.png", f"{w}: requests/s per path at the limit (mean of rounds, bars: min-max)",
                      [("rps", "requests/s", "req/s")]))
    lat = [(k, t, "ms") for k, t in (("client_p50_ms", "client p50"), ("client_p99_ms", "client p99")) if has(k)]
    if lat:
        specs.append((f"{w}-latency.png", f"{w}: client latency per path (mean of rounds, bars: min-max)", lat))
    cost = [(k, t, "µs/request") for k, t in (("app_cpu_us_per_req", "app CPU"), ("nginx_cpu_us_per_req", "nginx CPU")) if has(k)]
    if cost:
        specs.append((f"{w}-cost.png", f"{w}: CPU per request (mean of rounds, bars: min-max)", cost))
    return specs


# The stacked "where the time goes" chart: each bar is a path, built up from
# uds-ka (the socket, pooled) by the terms that separate it from uds-ka.
STACK_BASE = "uds-ka"
STACKS = [
    ("uds-ka", []),
    ("tcp-lo-ka", ["tcp_vs_uds_pooled"]),
    ("tcp-ka", ["tcp_vs_uds_pooled", "bridge_pooled"]),
    ("uds", ["uds_connect"]),
    ("tcp-lo", ["tcp_vs_uds_pooled", "tcp_lo_connect"]),
    ("tcp", ["tcp_vs_uds_pooled", "bridge_pooled", "tcp_connect"]),
]
STACK_PARTS = {  # term -> (legend, colour)
    "base": ("the socket, pooled (uds-ka)", "#8F8F8F"),
    "tcp_vs_uds_pooled": ("TCP stack against the socket", "#FF9830"),
    "bridge_pooled": ("the Docker bridge", "#F2495C"),
    "tcp_connect": ("connection setup", "#B877D9"),
    "tcp_lo_connect": ("connection setup", "#B877D9"),
    "uds_connect": ("connection setup", "#B877D9"),
}


def stack_bars(wl, key, scale):
    """[(path, [(part, value, measurable)])] for the paths whose terms were all measured."""
    base = (wl["paths"].get(STACK_BASE) or {}).get("mean", {}).get(key)
    if base is None:
        return []
    bars = []
    for path, terms in STACKS:
        if path not in wl["paths"]:
            continue
        ds = [((wl.get("breakdown") or {}).get(t) or {}).get("figures", {}).get(key) for t in terms]
        if any(d is None for d in ds):
            continue
        bars.append((path, [("base", base * scale, True)] + [(t, d["mean"], measurable(d)) for t, d in zip(terms, ds)]))
    return bars


def write_breakdown_chart(plt, w, wl, out_dir):
    """The stacked chart, one panel per figure that has bars; None when there is nothing to stack."""
    # Time only (µs): counts of switches do not stack with it.
    panels = [(f, label, scale, stack_bars(wl, f, scale)) for f, label, scale, unit in TERM_FIGURES if unit == "µs"]
    panels = [p for p in panels if len(p[3]) > 1]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels) + 1, 4.6), squeeze=False)
    for ax, (_, label, _, bars) in zip(axes[0], panels):
        seen = set()
        for x, (path, parts) in enumerate(bars):
            bottom = 0.0
            for part, v, ok in parts:
                legend, colour = STACK_PARTS[part]
                ax.bar(x, v, bottom=bottom, color=colour, hatch=None if ok else "//", edgecolor="white",
                       label=None if legend in seen else legend)
                seen.add(legend)
                bottom += v
            ax.text(x, bottom, f"{bottom:,.0f}", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(bars)), [p for p, _ in bars])
        ax.set_title(label)
        ax.set_ylabel("µs")
        ax.margins(y=0.12)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="upper left")
    title = f"{w}: where the time goes (means over rounds; hatched: no measurable difference)"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fname = f"{w}-breakdown.png"
    fig.savefig(Path(out_dir) / fname, dpi=100)
    plt.close(fig)
    return {"workload": w, "file": fname, "title": title}


def write_charts(rep, out_dir):
    """PNG charts per workload; returns [{workload, file, title}]."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for w, wl in rep["workloads"].items():
        paths = list(wl["paths"])
        for fname, title, panels in chart_specs(w, wl, rep["settings"]):
            fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels) + 1, 4.2), squeeze=False)
            for ax, (key, sub, unit) in zip(axes[0], panels):
                means = [wl["paths"][p]["mean"][key] for p in paths]
                xs = list(range(len(paths)))
                heights = [m if m is not None else 0 for m in means]
                lo = [(m - wl["paths"][p]["min"][key]) if m is not None else 0 for p, m in zip(paths, means)]
                hi = [(wl["paths"][p]["max"][key] - m) if m is not None else 0 for p, m in zip(paths, means)]
                ax.bar(xs, heights, color=[PATH_COLOURS.get(p, "grey") for p in paths], yerr=[lo, hi], capsize=5)
                for x, m in zip(xs, means):
                    if m is None:
                        ax.text(x, 0, "n/a", ha="center", va="bottom")
                ax.set_xticks(xs, paths)
                ax.set_title(sub)
                ax.set_ylabel(unit)
                ax.grid(axis="y", alpha=0.3)
            fig.suptitle(title, fontsize=10)
            fig.tight_layout()
            fig.savefig(Path(out_dir) / fname, dpi=100)
            plt.close(fig)
            written.append({"workload": w, "file": fname, "title": title})
        if not is_max(rep["settings"]):
            chart = write_breakdown_chart(plt, w, wl, out_dir)
            if chart:
                written.append(chart)
    return written
