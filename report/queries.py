"""Per phase (pure): its window, the PromQL over it, and its figures from the load generator's
own statistics and from Prometheus, with why a figure is missing and which
ones were read from the samples around the window."""
import math
import re

from report.interleaved import MIX
from report.lab import APP, APP_LOAD, CATALOGUE, GENERATORS, NGINX_LOG, listener_of, nginx_of, service
from report.values import CORE_MODES, METRICS, div, generator, matrix_samples, number, scalar

# The client straight to the app (catalogue.json's direct paths): no nginx figures.
DIRECT_PATHS = set((CATALOGUE.get("direct") or {}).get("paths") or {})
NO_NGINX = "no nginx on this path (the client straight to the app)"
# A counter sampled less often than the phase is long (cAdvisor: every 5-5.5 s
# with compose's flags, its samples carry their own timestamps) can have fewer
# than two samples inside a phase's window, where increase() gives nothing: the
# report then reads the samples up to this far around it. The others are
# scraped every 1 s (the app, nginx's log, node-exporter's CPU) or 5 s.
SPARSE_REACH_S = 15
# node-exporter is scraped every 5 s, as long as a default phase.
SPARSE_SOURCES = ("cadvisor", "node")
# process_cpu_seconds_total counts in clock ticks (/proc/<pid>/stat, USER_HZ:
# 10 ms on Linux): one tick over a phase's requests is the finest difference in
# the app's CPU per request a phase can show.
CPU_TICK_S = 0.01
# Which Prometheus job each server figure comes from, and its name, for the
# reason a figure is missing.
# Why cAdvisor or node-exporter is not running, where the run was: compose's
# make up leaves either out where it cannot run; on Kubernetes the chart's
# values turn them on (k8s/uds-lab/values.yaml, docs/kubernetes.md).
NOT_RUNNING = {
    "compose": {"cadvisor": " (make up leaves it out where it cannot run: see make doctor)",
                "node": " (make up leaves it out where it cannot run: see make doctor)"},
    "kubernetes": {"cadvisor": " (the chart's value costs.cadvisor=true turns it on: the kubelet's cAdvisor through "
                               "the API server's node proxy, a ClusterRole for nodes/proxy; docs/kubernetes.md)",
                   "node": " (the chart's value costs.nodeExporter=true turns it on, in a namespace labelled "
                           "pod-security.kubernetes.io/enforce=privileged; docs/kubernetes.md)"},
}
NO_CONTAINER = {
    "compose": "cAdvisor runs but labels no container (google/cadvisor#3772: see make doctor)",
    "kubernetes": "the kubelet's cAdvisor answers but with no series of this release's containers (the kubelet's "
                  "cAdvisor finds the containers' names in containerd at /run/containerd/containerd.sock: see "
                  "docs/kubernetes.md)",
}
COLLECTORS = {"app": "the app", "nginx": "nginx-exporter", "nginx-log": "nginx-log-exporter",
              "node": "node-exporter", "node-cpu": "node-exporter (its CPU collector)", "cadvisor": "cAdvisor"}
RAW_SOURCES = {
    "app_p50_s": "app", "app_p99_s": "app", "app_requests": "app", "app_cpu_s": "app", "app_cpu_fine_s": "app",
    "app_ctx_switches": "app", "app_container_cpu_s": "cadvisor",
    "nginx_cpu_s": "cadvisor", "generator_cpu_cores": "cadvisor", "nginx_requests": "nginx-log", "ctx_switches": "node",
    "connect_sum_s": "nginx-log", "connect_count": "nginx-log", "nginx_5xx": "nginx-log",
    **{f"core_{m}_s": "node-cpu" for m in CORE_MODES},
    "conntrack_entries": "app", "conntrack_limit": "app", "conntrack_drops": "app", "app_accepts": "app",
}
# Each server figure from its raw values (the last one divides, where two);
# the per-request costs divide by the generator's own count (PER_GENERATOR_REQUEST).
FIGURE_INPUTS = {
    "app_p50_ms": ["app_p50_s"], "app_p99_ms": ["app_p99_s"], "app_requests": ["app_requests"],
    "app_cpu_us_per_req": ["app_cpu_s", "app_requests"], "nginx_requests": ["nginx_requests"],
    "app_ctx_switches_per_req": ["app_ctx_switches"],
    "nginx_cpu_us_per_req": ["nginx_cpu_s"], "host_ctx_switches_per_req": ["ctx_switches"],
    "nginx_connect_ms": ["connect_sum_s", "connect_count"], "generator_cpu_cores": ["generator_cpu_cores"],
    **{f"core_{m}_us_per_req": [f"core_{m}_s"] for m in CORE_MODES},
    "conntrack_entries": ["conntrack_entries"], "conntrack_fill": ["conntrack_entries", "conntrack_limit"],
    "conntrack_drops": ["conntrack_drops"], "app_conns_per_req": ["app_accepts", "app_requests"],
}
PER_GENERATOR_REQUEST = ("nginx_cpu_us_per_req", "app_ctx_switches_per_req", "host_ctx_switches_per_req",
                         *(f"core_{m}_us_per_req" for m in CORE_MODES))
# sum(increase(S[Ns] @ T)) and sum(rate(...)): a counter the report can also
# read from its raw samples.
COUNTER_EXPR = re.compile(r"^sum\((increase|rate)\((.+)\[[0-9]+s\] @ [0-9.]+\)\)$")


def measured_phases(load):
    """The phases of one path that count: round >= 1 (warm-up phases are left
    out, and so is make load's interleaved stream: report/interleaved.py)."""
    return [p for p in load.get("phases", []) if p.get("round", 0) >= 1 and p.get("phase", "measure") != "warmup"
            and p.get("path") != MIX]


def phase_window(load, phase):
    """(start, end) in epoch seconds, or None when the generator did not record its start time."""
    start_ms = load.get("start_ms")
    if start_ms is None:
        return None
    start = start_ms / 1000.0 + phase["start_offset_s"]
    return start, start + phase["duration_s"]


def parse_cpuset(v):
    """A cpuset ("0", "0-2", "0,3") as a set of cores; empty or None: None."""
    if not v:
        return None
    cores = set()
    for part in str(v).split(","):
        lo, _, hi = part.strip().partition("-")
        cores.update(range(int(lo), int(hi or lo) + 1))
    return cores


# Why the server cores' time by mode is not given on an unpinned lab: a
# choice of the settings, said beside the figures, not a warning.
UNPINNED = ("nginx and the app are not pinned (NGINX_CPUSET, APP_CPUSET): their cores run other work too, so no "
            "core's time is theirs alone")


def server_cores(limits):
    """The cores nginx and the app are pinned to (sorted), or why the split by
    mode is not given: (cores, None) or (None, reason). limits: the report's
    compose limits per service."""
    nginx, app = (parse_cpuset((limits.get(n) or {}).get("cpuset")) for n in ("nginx", "app"))
    if nginx is None or app is None:
        return None, UNPINNED
    cores = nginx | app
    for name in GENERATORS:  # oha's too: it ran unwarned before the one list
        if (parse_cpuset((limits.get(name) or {}).get("cpuset")) or set()) & cores:
            return None, "the load generator shares the server cores (LOADGEN_CPUSET): its time would be counted as theirs"
    return sorted(cores), None


def server_queries(path, duration_s, end_s, gen="k6", cores=None):
    """PromQL for one phase: instant queries at the window's end over its
    length; cores: the server cores, for their time by mode."""
    r = f"[{int(round(duration_s))}s] @ {end_s:.3f}"
    inc = lambda metric, sel="": f"sum(increase({metric}{'{' + sel + '}' if sel else ''}{r}))"  # noqa: E731
    # The app's native histogram (what Prometheus keeps of ours), or classic
    # buckets (what a swapped-in app may expose).
    q = lambda qq: (  # noqa: E731
        f"histogram_quantile({qq}, sum(increase(app_http_request_duration_seconds{{{APP_LOAD}}}{r})))"
        f" or histogram_quantile({qq}, sum by (le) (increase(app_http_request_duration_seconds_bucket{{{APP_LOAD}}}{r})))"
    )
    return {
        "app_p50_s": q(0.5),
        "app_p99_s": q(0.99),
        "app_requests": inc("app_http_requests_total", APP_LOAD),
        # Connections the app accepted on the path's listener: per request, ~1
        # on a path that opens one per request, ~0 on a pooled one that pools.
        "app_accepts": inc("app_connections_accepted_total", f'{APP},listener="{listener_of(path)}"'),
        "app_cpu_s": inc("process_cpu_seconds_total", APP),
        # The lab's app's own CPU time from getrusage (microseconds), read first.
        "app_cpu_fine_s": inc("app_process_cpu_seconds_total", APP),
        # An app that exports no metrics: its container's CPU (cAdvisor).
        "app_container_cpu_s": inc("container_cpu_usage_seconds_total", service("app")),
        # The app process's own switches (getrusage), voluntary and involuntary.
        "app_ctx_switches": inc("app_process_context_switches_total", APP),
        "nginx_cpu_s": inc("container_cpu_usage_seconds_total", service(nginx_of(path))),
        "nginx_requests": inc("nginx_location_requests_total", f'{NGINX_LOG},path="{path}"'),
        "ctx_switches": inc("node_context_switches_total", 'job="node"'),
        "connect_sum_s": inc("nginx_location_upstream_connect_seconds_sum", f'{NGINX_LOG},path="{path}"'),
        "connect_count": inc("nginx_location_upstream_connect_seconds_count", f'{NGINX_LOG},path="{path}"'),
        "nginx_5xx": inc("nginx_location_requests_total", f'{NGINX_LOG},path="{path}",status=~"5.."'),
        "generator_cpu_cores": f"sum(rate(container_cpu_usage_seconds_total{{{service(gen)}}}{r}))",
        # The table at the phase's end (entries outlive connections: 120 s in TIME_WAIT).
        "conntrack_entries": f"max(app_netns_conntrack_entries{{{APP}}} @ {end_s:.3f})",
        "conntrack_limit": f"max(app_netns_conntrack_entries_limit{{{APP}}} @ {end_s:.3f})",
        "conntrack_drops": inc("app_netns_conntrack_drops_total", APP),
        **({f"core_{m}_s": inc("node_cpu_seconds_total", f'job="node-cpu",cpu=~"{"|".join(map(str, cores))}",mode="{m}"')
            for m in CORE_MODES} if cores else {}),
    }


def client_figures(phase):
    """The load generator's own statistics for one phase (exact)."""
    d = phase.get("duration_ms") or {}
    requests = phase.get("requests") or 0
    return {
        "requests": requests,
        "rps": div(requests, phase.get("duration_s")),
        "client_p50_ms": number(d.get("p50")),
        "client_p95_ms": number(d.get("p95")),
        "client_p99_ms": number(d.get("p99")),
        "failed_rate": number(phase.get("failed_rate")) or 0.0,
        "dropped_iterations": phase.get("dropped_iterations") or 0,
        # openloop's: the share sent over 1 ms behind their due time (None: another generator).
        "late_rate": number(phase.get("late_rate")),
    }


def sparse_increase(series, start, end):
    """A counter's increase over [start, end] from its samples around the
    window, for when fewer than two lie inside it (increase() has nothing).
    Per series: the rate between the last sample at or before the start (else
    the first inside) and the first at or after the end (else the last inside),
    resets counted as increase() counts them, times the window's length.
    Returns (increase, None), or (None, reason)."""
    total, used = 0.0, 0
    for samples in series:
        pts = sorted((t, v) for t, v in samples if v is not None)
        inside = [p for p in pts if start < p[0] < end]
        before = [p for p in pts if p[0] <= start]
        after = [p for p in pts if p[0] >= end]
        a = before[-1] if before else (inside[0] if inside else None)
        b = after[0] if after else (inside[-1] if inside else None)
        if a is None or b is None or b[0] <= a[0]:
            continue
        seg = [p for p in pts if a[0] <= p[0] <= b[0]]
        delta = sum(v2 - v1 if v2 >= v1 else v2 for (_, v1), (_, v2) in zip(seg, seg[1:]))
        total += delta / (b[0] - a[0]) * (end - start)
        used += 1
    if used:
        return total, None
    return None, ("too few samples" if any(series) else "no series")


def sparse_estimate(query, expr, window):
    """A counter figure that increase() or rate() could not give, from the raw
    samples around the window: (value, None) or (None, "no series" | "too few samples")."""
    m = COUNTER_EXPR.match(expr)
    if m is None:
        return None, "no value"
    fn, selector = m.groups()
    start, end = window
    reach = int(math.ceil(end - start + 2 * SPARSE_REACH_S))
    series = matrix_samples(query(f"{selector}[{reach}s] @ {end + SPARSE_REACH_S:.3f}"))
    inc, reason = sparse_increase(series, start, end)
    if inc is None:
        return None, reason
    return (inc / (end - start) if fn == "rate" else inc), None


def missing_reason(query, raw_key, problem, window, cache, where="compose"):
    """Why a raw value is missing, in words, from its collector's `up` over the
    window; where: "compose" or "kubernetes" (a run of scripts/k8s.sh)."""
    job = RAW_SOURCES.get(raw_key)
    name = COLLECTORS.get(job, job)
    if job is None:
        return problem
    if job not in cache:
        start, end = window
        cache[job] = scalar(query, f'max(max_over_time(up{{job="{job}"}}[{int(math.ceil(end - start))}s] @ {end:.3f}))')
    if not cache[job] and job == "app":
        # Its metrics are optional (make contract): an app may export none.
        return "no metrics from the app (Prometheus could not scrape its /metrics: optional, see make contract)"
    if not cache[job]:
        hint = NOT_RUNNING[where].get(job, "")
        return f"{name} not running{hint}"
    if problem == "too few samples":
        return f"too few {name} samples around the window"
    if job == "cadvisor" and problem == "no series":
        return NO_CONTAINER[where]
    return f"no series from {name}" if problem == "no series" else f"{name}: {problem}"


def server_values(query, phase, window, gen="k6", cores=(None, "not asked"), where="compose"):
    """The raw values of one phase, the ones read from samples around the window
    (sparse counters), and why the others are missing. cores: server_cores()'s answer."""
    if window is None:
        return {}, [], {k: "load.json has no start time" for k in RAW_SOURCES}
    exprs = server_queries(phase["path"], phase["duration_s"], window[1], gen, cores[0])
    raw, estimated, why, cache = {}, [], {}, {}
    if not cores[0]:
        why.update({f"core_{m}_s": cores[1] for m in CORE_MODES})
    direct = phase["path"] in DIRECT_PATHS
    for k, e in exprs.items():
        if direct and RAW_SOURCES.get(k) == "nginx-log" or direct and k == "nginx_cpu_s":
            raw[k], why[k] = None, NO_NGINX
            continue
        raw[k] = scalar(query, e)
        # No 5xx series means none was logged: nothing missing.
        if raw[k] is not None or k == "nginx_5xx":
            continue
        problem = "no value in the window"
        if RAW_SOURCES.get(k) in SPARSE_SOURCES:
            raw[k], problem = sparse_estimate(query, e, window)
            if raw[k] is not None:
                estimated.append(k)
                continue
        why[k] = missing_reason(query, k, problem, window, cache, where)
    return raw, estimated, why


def server_figures_explained(query, phase, window, gen="k6", baseline=None, cores=(None, "not asked"), where="compose"):
    """(figures, estimated, missing, resolution): the figures, those read from
    samples around the window, why each missing one is missing, and the
    resolution of those read from a coarse counter. baseline is
    idle_baseline's answer (None: none measured); cores server_cores()'s."""
    raw, estimated_raw, why = server_values(query, phase, window, gen, cores, where)
    # The fine counter is an alternative to the ticks: its absence is no gap.
    why.pop("app_cpu_fine_s", None)
    idle_rate = (baseline or {}).get("host_ctx_switches_per_s")
    figures = server_figures_from(raw, window, phase, idle_rate)
    estimated, missing = [], {}
    for fig, inputs in FIGURE_INPUTS.items():
        if any(k in estimated_raw for k in inputs) and figures.get(fig) is not None:
            estimated.append(fig)
        if figures.get(fig) is not None:
            continue
        gone = [why[k] for k in inputs if k in why]
        if gone and fig == "app_cpu_us_per_req" and "app_container_cpu_s" in why:
            # Its fallback, the app's container CPU, is missing too: say both.
            missing[fig] = f"{gone[0]}; its container's CPU: {why['app_container_cpu_s']}"
        elif gone:
            missing[fig] = gone[0]
        elif fig == "host_ctx_switches_per_req" and idle_rate is None and phase.get("requests"):
            missing[fig] = (baseline or {}).get("missing") or "no idle baseline"
        elif len(inputs) == 2 and not raw.get(inputs[1]):
            missing[fig] = f"no {METRICS.get(inputs[1], (inputs[1].replace('_', ' '),))[0]} in the window"
        elif fig in PER_GENERATOR_REQUEST and not phase.get("requests"):
            missing[fig] = "no requests in the window"
        else:
            missing[fig] = "no value (NaN)"
    return figures, estimated, missing, resolution(raw, phase.get("requests"))


def app_cpu(raw):
    """The app's CPU seconds in the window: getrusage's counter where the app
    exports it, else process_cpu_seconds_total's clock ticks."""
    return raw.get("app_cpu_fine_s") if raw.get("app_cpu_fine_s") is not None else raw.get("app_cpu_s")


def above_idle(switches, idle_rate, duration_s):
    """The host's switches in a phase less what the idle background would have
    made in as long (idle rate x phase length); None without either."""
    if switches is None or idle_rate is None:
        return None
    return switches - idle_rate * duration_s


def server_figures_from(raw, window, phase, idle_rate=None):
    """The phase's server figures from its raw values; idle_rate is the host's
    context switches per second in the run's idle phase."""
    get = raw.get
    requests = phase.get("requests") or None
    return {
        "app_p50_ms": div(get("app_p50_s"), 1, 1e3),
        "app_p99_ms": div(get("app_p99_s"), 1, 1e3),
        "app_requests": get("app_requests"),
        "app_conns_per_req": div(get("app_accepts"), get("app_requests")),
        # The app's own CPU counter per request it counted (getrusage's, else
        # the clock-tick one); without its metrics, its container's CPU per
        # request the generator completed.
        "app_cpu_us_per_req": (div(app_cpu(raw), get("app_requests"), 1e6)
                               if app_cpu(raw) is not None and get("app_requests")
                               else div(get("app_container_cpu_s"), requests, 1e6)),
        "nginx_requests": get("nginx_requests"),
        "nginx_cpu_us_per_req": div(get("nginx_cpu_s"), requests, 1e6),
        "app_ctx_switches_per_req": div(get("app_ctx_switches"), requests),
        "host_ctx_switches_per_req": div(above_idle(get("ctx_switches"), idle_rate, phase.get("duration_s") or 0), requests),
        "nginx_connect_ms": div(get("connect_sum_s"), get("connect_count"), 1e3),
        # No 5xx series means none was logged; no window means unknown.
        "nginx_5xx": (get("nginx_5xx") or 0.0) if window is not None else None,
        "generator_cpu_cores": get("generator_cpu_cores"),
        **{f"core_{m}_us_per_req": div(get(f"core_{m}_s"), requests, 1e6) for m in CORE_MODES},
        "conntrack_entries": get("conntrack_entries"),
        "conntrack_fill": div(get("conntrack_entries"), get("conntrack_limit")),
        "conntrack_drops": get("conntrack_drops"),
    }


def resolution(raw, requests=None):
    """Per figure read from a coarse counter, the smallest step it can show
    in this phase: the app's CPU per request from clock ticks (where the app
    has no finer counter), one tick over its requests. The cores' time by
    mode (node-exporter, from /proc/stat) is not a sum of measured times but a
    count of ticks at each of which the core was found in a mode: a mode
    counted k ticks is uncertain by about sqrt(k) ticks (binomial sampling;
    in USER_HZ ticks, so an upper bound where the kernel ticks faster), and
    that, at least one tick, over the generator's requests is its resolution."""
    n = raw.get("app_requests")
    coarse = raw.get("app_cpu_fine_s") is None and raw.get("app_cpu_s") is not None
    out = {"app_cpu_us_per_req": CPU_TICK_S * 1e6 / n} if n and coarse else {}
    if requests:
        for m in CORE_MODES:
            s = raw.get(f"core_{m}_s")
            if s is not None:
                ticks = max(1.0, math.sqrt(max(s, 0.0) / CPU_TICK_S))
                out[f"core_{m}_us_per_req"] = ticks * CPU_TICK_S * 1e6 / requests
    return out


def phase_figures_with(load, query, baseline, cores=(None, "not asked"), where="compose"):
    """Every measured phase with its window and figures, in run order, given
    the idle baseline (idle_baseline); `missing` says why a server figure is
    n/a, `estimated` which ones came from samples around the window,
    `resolution` the finest step of a figure read from a coarse counter."""
    out = []
    gen = generator(load.get("settings") or {})
    for p in measured_phases(load):
        window = phase_window(load, p)
        server, estimated, missing, res = server_figures_explained(query, p, window, gen, baseline, cores, where)
        out.append({
            "name": p["name"],
            "workload": p["workload"],
            "path": p["path"],
            "round": p["round"],
            "endpoint": p.get("endpoint"),
            "window": None if window is None else {"start_s": round(window[0], 3), "end_s": round(window[1], 3)},
            "generator": gen,
            "figures": {**client_figures(p), **server},
            "resolution": res,
            "estimated": estimated,
            "missing": missing,
        })
    return out
