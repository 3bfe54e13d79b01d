"""The PNG charts (matplotlib, imported only when they are drawn)."""
from pathlib import Path

from report.breakdown import TERM_FIGURES
from report.stats import measurable
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
