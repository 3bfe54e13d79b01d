"""report.md (pure rendering)."""
from report.breakdown import MAX_FAILED_SHARE, figures_for
from report.verdicts import MIN_DOF_TO_PROJECT, POWER
from report.words import fmt_diff
from report.direct import lines as direct_lines
from report.interleaved import MIN_BLOCK_REQUESTS, MIN_BLOCKS, dof
from report.lab import margin_pct
from report.stats import ALPHA, ANSWER_ALPHA, CONFIDENCE, EXPLORE_ALPHA, has_interval, lost_to, no_interval
from report.values import CORE_MODES, METRICS, generator, headline, is_max, number
from report.warnings import estimated, MAX_DROPPED_SHARE, MAX_GENERATOR_CPU_SHARE, MAX_LATE_SHARE, MIN_PHASE_S, MIN_RATE_SHARE, SAME_CEILING

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
        return [prometheus] + cluster_lines(rep["cluster"], rep.get("segments")) + settings_lines(rep, s, gen)
    lines = [
        f"- Host: {m['sysname'] or 'n/a'} {m['release'] or ''} {m['machine'] or ''} (node {m['nodename'] or 'n/a'}), "
        f"{m['cores'] if m['cores'] is not None else 'n/a'} cores, {fmt_bytes(m['memory_bytes'])} memory",
        prometheus,
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
    lines += estimated_line(estimates)
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
            if r is None:
                continue
            lines.append(
                f"| {path} | {fmt_ratio(r['rps'])} | {fmt_ratio(r['client_p50_ms'])} | {fmt_ratio(r['client_p99_ms'])} | "
                f"{fmt_ratio(r['app_cpu_us_per_req'])} | {fmt_ratio(r['app_ctx_switches_per_req'])} | "
                f"{fmt_ratio(r['nginx_cpu_us_per_req'])} | {fmt_ratio(r['host_ctx_switches_per_req'])} | {e['verdict']} |"
            )
        lines.append("")
    lines += breakdown_table(wl.get("breakdown") or {}, settings)
    lines += modes_table(wl, cores)
    lines += conntrack_line(wl)
    lines += chart_lines(charts, w, exclude=FIRST_CHARTS)
    return lines


# The charts shown with the answer and with the stream, not at the end of
# their workload's section.
FIRST_CHARTS = ("-answer.png", "-stream.png", "-percentiles.png")


def chart_lines(charts, w, only=None, exclude=()):
    """The image lines of a workload's charts: those whose file ends with one
    of only (all by default), less those ending with one of exclude."""
    return [x for c in charts if c["workload"] == w and (only is None or c["file"].endswith(only))
            and not c["file"].endswith(tuple(exclude)) for x in (f"![{c['title']}]({c['file']})", "")]


def apart_line(terms, figures):
    """The terms whose figures over rounds pair phases further apart than back
    to back (up to a round), named, since the machine's swings between the two
    phases are in those cells; nothing where every term ran in pairs."""
    over_rounds = [f for f, *_ in figures if f != "client_p50_ms"] or [f for f, *_ in figures]
    apart = [t["label"] for t in terms.values() if t.get("back_to_back") is False
             and any((t["figures"].get(f) or {}).get("blocks") is None and t["figures"].get(f) for f in over_rounds)]
    if not apart:
        return []
    return [f"Back to back in every round: the answer's pairs (each pair's two phases in a row, which first "
            f"alternating). The rounds of these terms pair phases further apart, up to a round, so the machine's "
            f"swings between the two are in their cells: {'; '.join(apart)}.", ""]


def breakdown_table(terms, settings=None):
    """Where the time goes: each term's difference, per figure, in its unit."""
    if not terms:
        return []
    # A figure no term has (the cores' split where they are not pinned) is left out.
    figures = [f for f in figures_for(settings or {}) if any(t["figures"].get(f[0]) for t in terms.values())]
    streamed = any((t["figures"].get("client_p50_ms") or {}).get("blocks") for t in terms.values())
    lines = [
        "Where the time goes: one path minus another (less two more, where a term says so); mean "
        + (f"({CONFIDENCE:.0%} interval, share of the first path's figure): the client p50's paired second by second "
           "in the interleaved stream, as the answer's, the costs' round by round (a paired t-interval over rounds). "
           if streamed else
           f"({CONFIDENCE:.0%} paired t-interval over rounds, share of the first path's figure). ")
        + "An interval that "
        "includes 0 is no measurable difference, and so is one below the resolution of the counter it was read from. "
        f"The answer's pairs' client median is judged with the answer (Holm's correction, at {ANSWER_ALPHA:.0%}); "
        "every other cell with the report's other comparisons (Benjamini-Hochberg, false discovery rate "
        f"{EXPLORE_ALPHA:.0%}): a number is a finding that survived its correction; the rest are no measurable "
        "difference."
        + (" Flat out, a path's latency is mostly its queue at the limit, not a cost: the terms are in CPU and "
           "context switches per request only." if is_max(settings or {}) else ""),
        "",
    ] + apart_line(terms, figures) + [
        "| term | paths | " + " | ".join(f"{label} ({unit})" if unit else label for _, label, _, unit in figures) + " |",
        "| --- | --- |" + " --- |" * len(figures),
    ]
    crossed = False
    for t in terms.values():
        cells = " | ".join(fmt_diff(t["figures"].get(f), unit) for f, _, _, unit in figures)
        less = f" − ({t['less'][0]} − {t['less'][1]})" if t.get("less") else ""
        mark = " †" if (t["figures"].get("client_p50_ms") or {}).get("across_streams") else ""
        crossed = crossed or bool(mark)
        lines.append(f"| {t['label']} | {t['minuend']} − {t['subtrahend']}{less}{mark} | {cells} |")
    if crossed:
        lines += ["", "† Its client p50 pairs second b of the pooled paths' stream with second b of the others', one "
                  "stream after the other: the machine's drift between the two minutes is in it, which pairing at the "
                  "same instant cancels."]
    return lines + [""]


def precision_line(p):
    """A PRECISION run's outcome in words (load.json's "precision"), or None."""
    if not p:
        return None
    target = f"+/-{p['target_pct']:g}%"
    if not p["comparisons"]:
        return (f"Precision: PRECISION={p['target_pct']:g}% had no comparison of the answer to narrow (PATHS holds "
                f"no pair of it, or each pair has a failing path: the answer says which): {p['rounds']} rounds "
                "were run.")
    stein = (f" Stein's two-stage procedure: the first {p['first_stage_rounds']} rounds' spread set how many the run "
             "took, and the answer's intervals take their spread from them, so they keep their 95%."
             if p.get("first_stage_rounds") else "")
    if p["met"]:
        return (f"Precision: every comparison of the answer reached {target} of its first path's figure after "
                f"{p['rounds']} rounds (PRECISION; at most {p['max_rounds']}).{stein}")
    worst = max(p["comparisons"], key=lambda c: float("inf") if c["half_width"] is None else c["half_width"])
    w = "no interval" if worst["half_width"] is None else f"+/-{worst['half_width']:.1%}"
    return (f"Precision: **not met**: the target was {target}; after {p['rounds']} rounds (MAX_ROUNDS) the widest "
            f"comparison is {w} ({worst['pair']}, `{worst['workload']}`). More rounds, or a quieter machine, narrow it."
            f"{stein}")


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


def us(v):
    """µs, signed, without a needless decimal."""
    return f"{v:,.0f}" if abs(v) >= 10 else f"{v:,.1f}"


def answer_table(parts):
    """The answer of one workload (breakdown.answer_parts): the pairs with no
    verdict because a path failed first, then one row per comparison, the
    controls only where one failed, and the method in a line."""
    head = (f"**`{parts['workload']}`** (`{parts['route']}`), {parts['at']}, "
            f"{'requests/s' if parts.get('max') else 'client median latency'}:")
    lines = [head, ""]
    lines += [f"- {x[0].upper()}{x[1:]}." for x in parts["failed"]] + ([""] if parts["failed"] else [])
    if parts.get("max"):
        return lines + max_rows(parts)
    lines += ["| connections | the socket against | through | socket saved | 95% CI | verdict |",
              "| --- | --- | --- | ---: | --- | --- |"]
    for r in parts["rows"]:
        b, a = r["pair"]
        through = r["nginx"][0] if r["nginx"][0] == r["nginx"][1] else f"{r['nginx'][0]} / {r['nginx'][1]}"
        handling = "pooled (keepalive)" if r["handling"] == "pooled" else "new per request"
        if r["handling"] == "pooled" and not r["handling_words"].startswith("with pooled"):
            handling = "keepalive paths, not pooled here"
        # A point estimate only where it is a finding; the interval says the rest.
        saved = (f"{us(r['saved_us'])} µs ({r['share']:.0%})" if r["verdict"] == "differs" and r["share"] is not None
                 else "—")
        ci = f"{us(r['lo'])} to {us(r['hi'])} µs" if r["lo"] is not None else "—"
        if r.get("taken_back"):
            ci += " ‡"
        words = f"**{r['words']}**" if r["verdict"] in ("differs", "same") else r["words"]
        lines.append(f"| {handling} | {r['against']} (`{b}` vs `{a}`) | {through} | {saved} | {ci} | {words} |")
    lines.append("")
    failed_controls = [n.replace("**the control failed**", "**The control failed**") for n in parts["controls"]
                       if "control failed" in n]
    lines += [f"{n}." for n in failed_controls] + ([""] if failed_controls else [])
    if any(r.get("taken_back") for r in parts["rows"]):
        lines += ["‡ Its own interval excludes 0, but not once judged with the other comparisons: not sure yet.", ""]
    if parts["note"]:
        lines += [parts["note"].strip(), ""]
    lines += [f"Method: {parts['method'][0].lower()}{parts['method'][1:]}; {parts['judged']}; \"no difference\" "
              f"means that interval, widened for the comparisons judged together, lies within ±"
              f"{parts['margin_pct']:g}% of TCP's median (MARGIN). [How to read this](#how-to-read-this).", ""]
    return lines


def how_to_read_intervals(rep):
    """How the answer and the other figures are judged, from the constants
    and the method the code uses."""
    m = rep["margin_pct"] if rep.get("margin_pct") is not None else margin_pct()
    return [
        "- **The answer** comes from the interleaved stream, where it ran (`INTERLEAVE`, on by default): each "
        "pair's client medians are paired block by block (1 s; a block's median needs "
        f"{MIN_BLOCK_REQUESTS} successful requests on each path, an interval {MIN_BLOCKS} blocks), and the mean "
        f"difference gets a {CONFIDENCE:.0%} t-interval whose standard error is the equal-weighted cosine "
        f"estimator's, on floor(0.4 n^(2/3)) degrees of freedom ({dof(60)} at 60 blocks), which allows for "
        "neighbouring seconds that move together (docs/statistics.md has its calibration). The pooled paths and "
        "the new-connection paths run in a stream each: a pooled comparison never shares its stream with "
        "requests that open a connection. Only successful requests are timed, and a pair with a path that failed "
        f"more than {MAX_FAILED_SHARE:.0%} of its requests gets no verdict, only the path, its statuses and the "
        "likely cause. With `INTERLEAVE=0` the answer comes from the rounds (below).",
        f"- **Three verdicts**: *faster* or *slower by* so much when the interval excludes 0 once the answer's "
        "comparisons are judged together, their own family (Holm's correction: the chance that any of them is "
        f"called different when none is stays at {ANSWER_ALPHA:.0%}, the answer's share of the report's "
        f"{ALPHA:.0%}); *no difference larger than ±{m:g}%* when the interval, widened for "
        f"the comparisons judged together (Bonferroni), lies inside ±{m:g}% of TCP's median (equivalence; "
        "`MARGIN`); *not sure yet* otherwise, with the stream (or rounds) that would decide "
        f"{POWER * 10:.0f} times in 10 if the true difference is the one measured, its spread as uncertain as "
        f"measured (none from fewer than {MIN_DOF_TO_PROJECT} degrees of freedom). An interval that excludes 0 and lies inside ±{m:g}% is both, and "
        f"said so: *faster* (or *slower*) *by* so much, *inside the ±{m:g}% that counts*.",
        f"- **Costs and ratios** come from the rounds of one path at a time (each compared pair back to back, "
        "the order changing every round): a paired t-interval over rounds, a ratio's on the log ratios. A "
        "difference or ratio is measurable when its interval excludes no difference (0, or 1 for a ratio) and "
        "the difference is larger than one step of the counter it was read from. Every comparison of the report "
        "but the answer's is also judged with all the others by Benjamini-Hochberg's correction (false "
        f"discovery rate {EXPLORE_ALPHA:.0%}, the rest of the report's {ALPHA:.0%}: with no difference anywhere, "
        "a report states one in at most that share of runs): a cell whose own interval excludes no difference but that the correction "
        "takes back says so (‡ in the ratio table) and gives no interval. With 1 round, or rounds all equal, "
        "there is no interval and no verdict.",
    ]


def max_rows(parts):
    """max mode's answer table: the socket's requests/s as a ratio of TCP's."""
    lines = ["| connections | the socket against | through | socket's requests/s | 95% CI | verdict |",
             "| --- | --- | --- | ---: | --- | --- |"]
    for r in parts["rows"]:
        b, a = r["pair"]
        through = r["nginx"][0] if r["nginx"][0] == r["nginx"][1] else f"{r['nginx'][0]} / {r['nginx'][1]}"
        handling = "pooled (keepalive)" if r["handling"] == "pooled" else "new per request"
        ratio = f"{r['ratio']:.2f}x TCP's" if r["verdict"] == "differs" else "—"
        ci = f"{r['lo']:.2f}-{r['hi']:.2f}x" + (" ‡" if r.get("taken_back") else "") if r["lo"] is not None else "—"
        words = f"**{r['words']}**" if r["verdict"] == "differs" else r["words"]
        lines.append(f"| {handling} | {r['against']} (`{b}` vs `{a}`) | {through} | {ratio} | {ci} | {words} |")
    lines.append("")
    if any(r.get("taken_back") for r in parts["rows"]):
        lines += ["‡ Its own interval excludes 1, but not once judged with the other comparisons.", ""]
    return lines + [f"Method: {parts['method'][0].lower()}{parts['method'][1:]}; {parts['judged']}. "
                    "[How to read this](#how-to-read-this).", ""]


def render_markdown(rep):
    lines = [f"# uds-lab report: run `{rep['testid']}`", "", "## The answer", ""]
    for wl in rep["workloads"].values():
        parts = wl.get("answer_parts")
        # A table where the run compared a pair (the paragraph says why not, where it did not).
        usable = bool(parts) and (bool(parts["failed"]) or any(
            parts.get("max") or r["phrase"] or r["verdict"] != "none" for r in parts["rows"]))
        lines += answer_table(parts) if usable else [wl.get("answer") or "", ""]
        lines += chart_lines(rep["charts"], parts["workload"] if parts else None, only=("-answer.png",))
    if precision_line(rep.get("precision")):
        lines += [precision_line(rep["precision"]), ""]
    lines += [
        "These figures hold for this machine, these limits and these settings only. "
        + ("In max mode each path ran flat out: requests/s is its limit, unless a warning says the load generator "
        "was. " if is_max(rep["settings"]) else "Every phase ran at the same fixed rate. ")
        + f"Client figures are {rep['generator']}'s own statistics per phase; server figures come from Prometheus over each phase's window (the app "
        "and nginx-log-exporter scraped every second, the rest every 5 s or so, so they are estimates, `increase()` extrapolated to the "
        "window).",
        "",
        "## Machine, versions, settings",
        "",
    ]
    lines += machine_block(rep) + [""]
    for w, wl in rep["workloads"].items():
        lines += workload_section(w, wl, rep["charts"], rep["settings"], rep.get("server_cores"),
                                  estimated(rep["phases"], w) if wl["paths"] else None)
    if rep.get("direct"):
        lines += ["## Straight to the app", "", "The client (oha) straight to the app, no nginx, in the same rounds "
                  "as the paths through nginx-lo; the ratios are of requests/s flat out, each with its 95% interval.",
                  ""] + direct_lines(rep["direct"]) + [""]
    if rep.get("floor"):
        lines += ["## Down to the transport", ""] + rep["floor"] + [""]
    lines += ["## Warnings", ""]
    if rep["warnings"]:
        for wn in rep["warnings"]:
            where = " / ".join(x for x in (wn["workload"], wn["path"]) if x)
            phases = phases_named(wn["phases"], len(rep["phases"]))
            lines.append(f"- **{wn['kind']}**{' (' + where + ')' if where else ''}: {wn['message']}.{phases}")
    else:
        lines.append("- none")
    lines += [
        "",
        "## How to read this",
        "",
        "- nginx logs its upstream times with 1 ms resolution: a sub-millisecond connect reads 0, so the connect "
        "mean only moves when connecting takes milliseconds (under load or queueing). Client and app latencies have "
        "sub-millisecond resolution.",
        *how_to_read_intervals(rep),
        f"- Warnings are only what needs your action or changes what a figure means: **saturated** when the "
        f"generator dropped more than {MAX_DROPPED_SHARE:.0%} of a phase's requests, sent more than "
        f"{MAX_LATE_SHARE:.0%} over 1 ms behind their due time (openloop), held less than {MIN_RATE_SHARE:.0%} of "
        f"RATE, or used {MAX_GENERATOR_CPU_SHARE:.0%} or more of its CPU limit (fewer drops are shown in the tables); "
        "**errors** on any failed request or nginx 5xx; **short_phase** under "
        f"{MIN_PHASE_S} s (five scrapes of the app); **same_ceiling** (max mode) when every path is within "
        f"{SAME_CEILING - 1:.0%} of the others; **not_pooled** when the keepalive paths did not reuse connections; "
        "**missing_figures** when a collector is missing; **conntrack_full** when the app's connection-tracking "
        "table fills. An interval that includes no difference is shown in its table, and a figure read from the "
        "samples around its phase is marked under its table; neither is a warning.",
        "- Whose figures: the client's (latency, requests, errors) are the load generator's own, tagged per "
        "request with its path; nginx's come from its access log and stub_status; the host's and the containers' "
        "from node-exporter and cAdvisor. The **app**'s (its requests, latency, CPU and context switches, listen "
        "backlog, connection tracking) are what the app exports on /metrics: the app under test measures itself, "
        "so a swapped-in image's are only as true as its own code (docs/design.md, \"Inputs\"). Prometheus keeps "
        "of each target only its own series, and nothing writes into it (k6's remote write only where switched on).",
        "- Context switches, per request the load generator completed: **app** is the app process's own "
        "(`app_process_context_switches_total`, getrusage: voluntary + involuntary), what the path makes the app do; "
        "it is judged like the other costs. **host above idle** is the whole host's (node-exporter) less its "
        "background: the run starts with `IDLE` seconds without requests, the host's switches per second there "
        "(from at least two node-exporter samples inside it) times the phase's length is subtracted from the phase's "
        "switches, and the rest is divided by its requests. It still counts nginx, the load generator and the "
        "exporters' extra work under load, and the background's swings (it can come out below 0): shown, not judged. "
        "Without an idle phase (IDLE=0, a run from before it) or with fewer than two samples in it, it is n/a and "
        "the warnings say why.",
        "- Where the time goes: `tcp` and `tcp-ka` cross the Docker bridge (veth pair, bridge, two network "
        "namespaces) to the app; `tcp-lo` and `tcp-lo-ka` come from nginx-lo, the same nginx in the app's network "
        "namespace, over loopback; `uds*` use the Unix socket. The answer compares paths through the same nginx "
        "(`tcp-lo` with `uds-lo`, `tcp` with `uds`); the bridge is `tcp` minus `tcp-lo` less `uds` minus `uds-lo` "
        "(the two nginx instances' own difference), and the controls (`uds` against `uds-lo`) say how much the two "
        "instances differ." if not rep.get("cluster") else
        "- Where the time goes (Kubernetes): `tcp` and `tcp-ka` come from the nginx in its own pod across the pod "
        "network (and, with the chart's default `nginx.remoteUpstream=service`, the Service's NAT); `tcp-lo` and "
        "`tcp-lo-ka` from the nginx sidecar in the app's pod over the pod's loopback; `uds-lo*` from the same sidecar "
        "over the socket in the pod's shared folder. The socket does not leave its pod, so there is no `uds` path "
        "and no control of the two nginx: `uds-lo` against `tcp` compares two nginx as well as two transports.",
        "- nginx CPU per request needs cAdvisor, the host's context switches node-exporter (the app's come from the app); `make up` leaves them out where "
        "they cannot run (`make doctor` says why). A figure that is n/a in every round says why in its cell; the "
        "warnings list the rest. Where a collector samples less often than a phase is long (cAdvisor: every 5-10 s), "
        "the figure is read from the samples around the phase's window, an estimate marked under its table.",
        "",
    ]
    return "\n".join(lines)
