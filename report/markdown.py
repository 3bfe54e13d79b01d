"""report.md (pure rendering): the answer (report/markdown_answer.py), your traffic (report/traffic.py), the
machine and settings, a section per workload (its stream, means, ratios to tcp, where the time goes:
report/markdown_breakdown.py), the warnings and how to read it (report/markdown_howto.py)."""
from report import machine_state, traffic, words
from report.direct import lines as direct_lines
from report.markdown_answer import answer_table, precision_line
from report.markdown_breakdown import breakdown_table
from report.markdown_howto import how_to_read
from report.stats import CONFIDENCE, has_interval, lost_to, no_interval
from report.values import CORE_MODES, METRICS, generator, headline, is_max, number
from report.warnings import estimated


def fmt(v, decimals=2, suffix=""):
    if v is None:
        return "n/a"
    return f"{v:,.{decimals}f}{suffix}"


def fmt_bytes(v):
    n = number(v)
    if n is None:
        return str(v) if v not in (None, "") else "n/a"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(v)


def fmt_ratio(r):
    """A ratio cell: its interval where it is one to read; a correction that
    took it back (‡) or a counter's step (below its resolution) give none."""
    if r is None:
        return "n/a"
    if not has_interval(r):
        return f"{r['mean']:.2f}x ({no_interval(r)})"
    if r.get("below_resolution"):
        return f"{r['mean']:.2f}x (below the counter's resolution)"
    if lost_to(r):
        return f"{r['mean']:.2f}x ‡"
    left = f"; {r['dropped']} round{'s' if r['dropped'] > 1 else ''} left out" if r.get("dropped") else ""
    return f"{r['mean']:.2f}x ({r['lo']:.2f}-{r['hi']:.2f}{left})"


def errors_cell(entry, gen="k6"):
    """The path's errors, named by who saw them: the load generator (openloop, k6, wrk or oha) and nginx."""
    failed = entry["max"]["failed_rate"] or 0
    five = entry["max"]["nginx_5xx"]
    parts = []
    if failed > 0:
        parts.append(f"{gen} failed up to {failed:.2%}")
    if five:
        parts.append(f"nginx 5xx up to {five:.0f}/round")
    return ", ".join(parts) if parts else ("none" if five is not None else f"none ({gen}); nginx n/a")


def machine_block(rep):
    m, c, s = rep["machine"], rep["compose"], rep["settings"]
    gen = generator(s)
    prometheus = f"- Prometheus {m['prometheus_version'] or 'n/a'}" + (f" at {rep['prometheus']}" if rep.get("prometheus") else "")
    if rep.get("cluster"):
        return [prometheus, machine_state.bullet(rep)] + cluster_lines(rep["cluster"], rep.get("segments")) + settings_lines(rep, s, gen)
    lines = [
        f"- Host: {m['sysname'] or 'n/a'} {m['release'] or ''} {m['machine'] or ''} (node {m['nodename'] or 'n/a'}), "
        f"{m['cores'] if m['cores'] is not None else 'n/a'} cores, {fmt_bytes(m['memory_bytes'])} memory",
        prometheus, machine_state.bullet(rep),
    ]
    for name in ("app", "nginx", gen):
        l = c["limits"][name]
        extra = f", worker_processes {l['worker_processes']}" if name == "nginx" else ""
        lines.append(
            f"- {name}: cpus {l['cpus'] if l['cpus'] is not None else 'n/a'}, cpuset {l['cpuset'] or 'any'}, "
            f"memory {fmt_bytes(l['mem_limit'])}{extra}"
        )
    images = ", ".join(f"{n} `{i}`" for n, i in c["images"].items() if i) or "n/a (no compose.json)"
    lines.append(f"- Images: {images}")
    lines.append("- Loopback in the app's network namespace: " + (
        "not tracked (APP_LO_NOTRACK=1: no conntrack entry per new TCP connection, as in a pod)"
        if c.get("lo_notrack") == "1" else "tracked, as Docker sets it up (its embedded DNS's NAT rules; "
        "APP_LO_NOTRACK=1 turns it off)"))
    return lines + settings_lines(rep, s, gen)


def settings_lines(rep, s, gen):
    """The generator's settings and the idle baseline."""
    lines = []
    pace = ("connections",) if is_max(s) else ("rate",)
    keys = ("mode", "workloads", "paths") + pace + ("duration", "rounds", "warmup", "idle", "endpoint", "cpu_iterations", "sleep_ms")
    shown = ", ".join(f"{k}={','.join(map(str, s[k])) if isinstance(s.get(k), list) else s.get(k)}" for k in keys if k in s)
    lines.append(f"- Load generator {gen}: {shown}; gap between phases {rep.get('gap_s')} s")
    lines.append(f"- {idle_line(rep.get('idle_baseline') or {})}")
    return lines


def cluster_lines(k, segments):
    """Where a Kubernetes run took place (scripts/k8s.sh's cluster.json), in place of compose's limits."""
    lines = [
        f"- Where: Kubernetes {k.get('kubelet') or 'n/a'}, node `{k.get('node') or 'n/a'}` ({k.get('os') or 'n/a'}, "
        f"kernel {k.get('kernel') or 'n/a'}, {k.get('runtime') or 'n/a'}, {k.get('cores') or 'n/a'} cores), network "
        f"plugin: {k.get('network_plugin') or 'not named (K8S_NETWORK_PLUGIN)'}; `tcp` and `tcp-ka` cross the pod "
        "network, not a Docker bridge",
        "- Images: " + (", ".join(f"{n} `{i}`" for n, i in sorted((k.get("images") or {}).items())) or "n/a"),
    ]
    if k.get("placement") is not None:
        lines.append("- " + placement_line(k["placement"]))
    n = k.get("lo_conntrack_entries")
    lines.append("- Loopback in the app's pod: " + (
        "not measured (the sidecar could not read its network namespace's conntrack count)" if n is None else
        f"not tracked (0 conntrack entries in its network namespace after the run, as in a pod without a mesh)"
        if n == 0 else f"tracked ({n} conntrack entries in its network namespace after the run: a mesh's or "
        "the node's rules turn conntrack on there)"))
    if segments:
        lines.append(
            f"- The generator ran as {segments['pods']} pods, pod i sending every request of the stream whose index "
            f"is i modulo {segments['pods']} (requests {', '.join(map(str, segments['requests']))}; starts "
            f"{segments['start_spread_ms']} ms apart): counts are sums, and every quantile, a block's median too, is "
            "read from the pods' histograms added, the quantile of their pooled requests")
    return lines


def placement_line(placement):
    """Where each pod ran (cluster.json's placement: component -> nodes): whether
    tcp's nginx and the app shared a node, and where the generator ran."""
    app, nginx, gen = (placement.get(c) or [] for c in ("app", "nginx", "openloop"))
    names = lambda nodes: ", ".join(f"`{n}`" for n in nodes)  # noqa: E731
    if not app or not nginx:
        where = "Placement: n/a (cluster.json names no node of the app's pod or nginx's)"
    elif set(app) & set(nginx):
        where = (f"Placement: nginx and the app on one node ({names(sorted(set(app) | set(nginx)))}): the `tcp` path "
                 "crosses the pod network inside that node, not a wire between nodes")
    else:
        where = (f"Placement: nginx and the app on different nodes (nginx on {names(nginx)}, the app on "
                 f"{names(app)}): the `tcp` path crosses the network between them")
    if gen:
        where += f"; the generator on {names(gen)}" + (" (beside the app: its CPU is taken from the app's node)"
                                                       if set(gen) & set(app) else "")
    return where


def idle_line(b):
    """The idle baseline in words: the host's background the phases have subtracted, or why there is none."""
    rate = b.get("host_ctx_switches_per_s")
    if rate is None:
        return f"Idle baseline: n/a ({b.get('missing') or 'not measured'}): host context switches are not shown"
    return (f"Idle baseline: the host made {rate:,.0f} context switches/s with no requests ({b['duration_s']:g} s "
            f"before the first phase, {b['samples']} node-exporter samples); each phase's host figure has this "
            "rate x its length subtracted")


def na_cell(entry, key, decimals):
    """A mean, or n/a with the reason when every round misses it for one reason."""
    v = entry["mean"][key]
    if v is not None:
        return fmt(v, decimals)
    why = (entry.get("missing") or {}).get(key)
    return f"n/a ({why.split(' (')[0]})" if why else "n/a"  # the warnings give the rest


def modes_table(wl, cores):
    """The server cores' time by mode per request, per path, or why not given."""
    cores = cores or {}
    if not cores.get("cores"):
        return [f"The server cores' time by mode is not given: {cores.get('missing') or 'unknown cores'}.", ""]
    modes = [f"core_{m}_us_per_req" for m in CORE_MODES]
    lines = [f"The server cores' time by mode (cores {','.join(map(str, cores['cores']))}: nginx, the app and the "
             "kernel's work on them, from node-exporter's per-CPU counters; µs per request, means over rounds). "
             "A difference between paths in system or softirq time is the kernel's share of what the path costs.",
             "", "| path | " + " | ".join(CORE_MODES) + " | total |", "| --- |" + " ---: |" * (len(CORE_MODES) + 1)]
    for path, e in wl["paths"].items():
        vals = [e["mean"].get(k) for k in modes]
        total = sum(v for v in vals if v is not None) if any(v is not None for v in vals) else None
        lines.append(f"| {path} | " + " | ".join(na_cell(e, k, 1) for k in modes) + f" | {fmt(total, 1)} |")
    return lines + [""]


def conntrack_line(wl):
    """The app's connection-tracking table over the workload's phases, or
    nothing where its namespace tracks none (or its metrics are not the lab's)."""
    ends = {path: e["max"].get("conntrack_entries") for path, e in wl["paths"].items()}
    if all(v is None for v in ends.values()):
        return []
    fill = max((e["max"].get("conntrack_fill") or 0) for e in wl["paths"].values())
    drops = sum((e["mean"].get("conntrack_drops") or 0) * len(e["rounds"]) for e in wl["paths"].values())
    return [("Connection tracking in the app's network namespace (Docker's embedded DNS puts NAT rules there, and "
             "with them tracking; a pod's sidecar has none): each new TCP connection is an entry that outlives it "
             "by 120 s (TIME_WAIT); the socket's are none. Entries at the end of a phase, at most: "
             + ", ".join(f"{path} {fmt(v, 0)}" for path, v in ends.items())
             + f"; the table at most {fill:.0%} full; {drops:,.0f} connections dropped by it."), ""]


def interleaved_table(mix):
    """Each path over the interleaved stream: what the answer's latency comes from."""
    if not mix:
        return []
    if mix.get("streams"):
        each = "; then ".join(f"the {s['stream'] or ''} paths ({', '.join(s['paths'])}) for {s['duration_s']:g} s"
                              for s in mix["streams"])
        said = (f"At the same instant, in one arrival stream per connection handling (a pooled comparison never "
                f"shares its stream with requests that each open a connection): {each}, requests interleaved in a "
                f"balanced random order; the answer and the breakdown's client p50 pair the paths' medians block by "
                f"block ({mix['block_s']} s), a term across the streams second b of each (marked †).")
    else:
        said = (f"At the same instant: every path in one arrival stream for {mix['duration_s']:g} s, requests "
                f"interleaved in a balanced random order; the answer and the breakdown's client p50 pair these paths' "
                f"medians block by block ({mix['block_s']} s).")
    lines = [said, "",
             "| path | requests | req/s | client p50 (ms) | p99 (ms) | blocks with a median | failed |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for path, e in mix["paths"].items():
        lines.append(f"| {path} | {e['requests']} | {fmt(e['rps'], 1)} | {fmt(e['client_p50_ms'], 3)} | "
                     f"{fmt(e['client_p99_ms'], 3)} | {e['blocks']} | {e['failed_rate']:.2%} |")
    return lines + [""]


def tcp_pairs_words(paths):
    """Which paths ran back to back with tcp; the others' rounds pair phases up to a round apart."""
    if paths is None:
        return ""
    named = ", ".join(f"`{p}`" for p in paths) if paths else "no path"
    return (f"Back to back with tcp in every round: {named}; every other path's round pairs with tcp's "
            f"further apart, up to a round, so the machine's swings between them are in its ratio's interval.")


def estimated_line(estimates):
    """The figures of the table above read from the samples around their
    phase's window (warnings.estimated()), or nothing."""
    if not estimates:
        return []
    what = "; ".join(f"{METRICS[f][0]} in {n} of {total} phases" for f, (n, total) in estimates.items())
    return [f"Estimates: {what} had fewer than two samples inside the phase (cAdvisor and node-exporter sample every "
            "5-10 s), so they are read from the samples around it.", ""]


def workload_section(w, wl, charts, settings=None, cores=None, estimates=None):
    settings = settings or {}
    lines = [f"## Workload `{w}`", ""]
    lines += interleaved_table(wl.get("interleaved"))
    lines += chart_lines(charts, w, only=("-stream.png", "-percentiles.png"))
    if wl.get("interleaved") and not wl["paths"]:
        lines += ["No rounds of one path at a time (ROUNDS=0): no costs per request (CPU, context switches) and no "
                  "ratios to tcp.", ""]
    elif wl.get("interleaved"):
        lines += ["Then one path at a time, for what no interleaving can split (CPU and context switches per "
                  "request), each compared pair back to back:", ""]
    lines += means_table(wl, settings)
    lines += estimated_line(estimates)
    lines += ratio_table(wl, settings)
    lines += breakdown_table(wl.get("breakdown") or {}, settings)
    lines += modes_table(wl, cores)
    lines += conntrack_line(wl)
    lines += chart_lines(charts, w, exclude=FIRST_CHARTS)
    return lines


def means_table(wl, settings):
    """A workload's means over its measured rounds, a row per path."""
    lines = []
    if wl["paths"]:
        lines += [
            "Means over the measured rounds (warm-up left out).",
            "",
            "| path | req/s | client p50 | p95 | p99 (ms) | app p50 | p99 (ms) | nginx connect (ms) | app CPU µs/req | "
            "app ctx switches/req | nginx CPU µs/req | host ctx switches/req above idle | errors |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
    for path, e in wl["paths"].items():
        m = e["mean"]
        nginx_cpu = na_cell(e, "nginx_cpu_us_per_req", 1)
        lines.append(
            f"| {path} | {fmt(m['rps'], 1)} | {fmt(m['client_p50_ms'], 3)} | {fmt(m['client_p95_ms'], 3)} | "
            f"{fmt(m['client_p99_ms'], 3)} | {na_cell(e, 'app_p50_ms', 3)} | {na_cell(e, 'app_p99_ms', 3)} | "
            f"{na_cell(e, 'nginx_connect_ms', 3)} | {na_cell(e, 'app_cpu_us_per_req', 1)} | "
            f"{na_cell(e, 'app_ctx_switches_per_req', 2)} | {nginx_cpu} | "
            f"{na_cell(e, 'host_ctx_switches_per_req', 2)} | {errors_cell(e, generator(settings))} |"
        )
    lines.append("")
    return lines


def ratio_table(wl, settings):
    """A workload's ratios to tcp, a row per path, or why there are none."""
    lines = []
    if not wl["paths"]:
        pass
    elif not wl["tcp_measured"]:
        lines += ["tcp was not measured in this run: no ratios to tcp.", ""]
    else:
        lines += [
            "Ratio to tcp, computed per round (path's round r / tcp's round r), then their geometric mean and "
            f"({CONFIDENCE:.0%} interval, a t-interval on the log ratios over rounds). Below 1: less than tcp; an "
            "interval that includes 1 is no measurable difference. ‡: its own interval excludes 1, but not once "
            "judged with the report's other comparisons but the answer's (Benjamini-Hochberg): no measurable difference, so no "
            "interval is given. " + tcp_pairs_words(wl.get("back_to_back_with_tcp")),
            "",
            "| path | req/s ratio | p50 ratio (95% CI) | p99 ratio | app CPU ratio | app ctx switches ratio | "
            f"nginx CPU ratio | host ctx switches ratio | verdict ({METRICS[headline(settings)[0]][0]}) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for path, e in wl["paths"].items():
            r = e["ratio_to_tcp"]
            if r is None:  # the baseline, or a failing path: its verdict says so
                lines += [f"| {path} |{' — |' * 7} {e['verdict']} |"] if e.get("verdict") else []
                continue
            lines.append(
                f"| {path} | {fmt_ratio(r['rps'])} | {fmt_ratio(r['client_p50_ms'])} | {fmt_ratio(r['client_p99_ms'])} | "
                f"{fmt_ratio(r['app_cpu_us_per_req'])} | {fmt_ratio(r['app_ctx_switches_per_req'])} | "
                f"{fmt_ratio(r['nginx_cpu_us_per_req'])} | {fmt_ratio(r['host_ctx_switches_per_req'])} | {e['verdict']} |"
            )
        lines.append("")
    return lines


# The charts shown with the answer and with the stream, not at the end of
# their workload's section.
FIRST_CHARTS = ("-answer.png", "-stream.png", "-percentiles.png")


def chart_lines(charts, w, only=None, exclude=()):
    """The image lines of a workload's charts: those whose file ends with one
    of only (all by default), less those ending with one of exclude."""
    return [x for c in charts if c["workload"] == w and (only is None or c["file"].endswith(only))
            and not c["file"].endswith(tuple(exclude)) for x in (f"![{c['title']}]({c['file']})", "")]


def phases_named(names, total, most=6):
    """A warning's phases in words: all of them, a few by name, or the first
    few and how many more (a list of every phase name says nothing)."""
    if not names:
        return ""
    if len(names) == total and total > 1:
        return f" Phases: all {total}."
    if len(names) <= most:
        return f" Phases: {', '.join(names)}."
    return f" Phases: {', '.join(names[:3])} and {len(names) - 3} more (report.json lists them)."


def render_markdown(rep):
    lines = [f"# uds-lab report: run `{rep['testid']}`", "", "## The answer", ""]
    lines += answer_section(rep)
    lines += machine_section(rep)
    for w, wl in rep["workloads"].items():
        lines += workload_section(w, wl, rep["charts"], rep["settings"], rep.get("server_cores"),
                                  estimated(rep["phases"], w) if wl["paths"] else None)
    if rep.get("direct"):
        lines += ["## Straight to the app", "", "The client (oha) straight to the app, no nginx, in the same rounds "
                  "as the paths through nginx-lo; the ratios are of requests/s flat out, each with its 95% interval.",
                  ""] + direct_lines(rep["direct"]) + [""]
    if rep.get("floor"):
        lines += ["## Down to the transport", ""] + rep["floor"] + [""]
    lines += warnings_section(rep)
    lines += how_to_read(rep)
    return "\n".join(lines)


def answer_section(rep):
    """The answer: a table per workload (or its paragraph, where it compared no pair), its chart, and a
    PRECISION run's outcome."""
    lines = []
    for wl in rep["workloads"].values():
        parts = wl.get("answer_parts")
        # A table where the run compared a pair (the paragraph says why not, where it did not).
        usable = bool(parts) and (bool(parts["failed"]) or any(
            parts.get("max") or r["phrase"] or r["verdict"] != "none" for r in parts["rows"]))
        lines += answer_table(parts) if usable else [wl.get("answer") or "", ""]
        lines += chart_lines(rep["charts"], parts["workload"] if parts else None, only=("-answer.png",))
        lines += traffic.markdown(wl.get("traffic"), rep["margin_pct"])
    if precision_line(rep.get("precision")):
        lines += [precision_line(rep["precision"]), ""]
    return lines


def machine_section(rep):
    """What the figures hold for, then the machine, versions and settings."""
    lines = [
        "These figures hold for this machine, these limits and these settings only. "
        + ("In max mode each path ran flat out: requests/s is its limit, unless a warning says the load generator "
        "was. " if is_max(rep["settings"]) else f"Every phase {words.pace(rep['settings'])}. ")
        + f"Client figures are {rep['generator']}'s own statistics per phase; server figures come from Prometheus over each phase's window (the app "
        "and nginx-log-exporter scraped every second, the rest every 5 s or so, so they are estimates, `increase()` extrapolated to the "
        "window).",
        "",
        "## Machine, versions, settings",
        "",
    ]
    lines += machine_block(rep) + [""]
    return lines


def warnings_section(rep):
    """The warnings, each with its workload, path and phases."""
    lines = ["## Warnings", ""]
    if rep["warnings"]:
        for wn in rep["warnings"]:
            where = " / ".join(x for x in (wn["workload"], wn["path"]) if x)
            phases = phases_named(wn["phases"], len(rep["phases"]))
            lines.append(f"- **{wn['kind']}**{' (' + where + ')' if where else ''}: {wn['message']}.{phases}")
    else:
        lines.append("- none")
    return lines
