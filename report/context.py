"""The run's context (pure): machine, images and limits, and build_report,
which puts every part together into what report.json holds."""
from datetime import datetime, timezone

from report.breakdown import back_to_back, breakdown, failed_share, failures, figures_for, mark_apart, not_pooled
from report import traffic
from report.words import answer, answer_parts, max_answer_parts, pooled_words
from report import interleaved
from report.direct import rejudge, straight_to_the_app
from report.idle import idle_baseline
from report.queries import phase_figures_with, server_cores, server_queries
from report.lab import GENERATORS, TERMS, margin_pct as read_margin, pools, stack_of
from report.stats import EXPLORE_ALPHA, aggregate, common_reason, fdr, verdict
from report.values import generator, headline, is_max, labels, number, scalar
from report.warnings import MAX_DROPPED_SHARE, MIN_PHASE_S, MIN_RATE_SHARE, figure_warnings, late_reason, phase_warnings, ratio_warnings, warning

def machine_info(query):
    uname = labels(query, "node_uname_info")
    build = labels(query, "prometheus_build_info")
    cores = scalar(query, 'count(node_cpu_seconds_total{mode="idle"})')
    mem = scalar(query, "max(node_memory_MemTotal_bytes)")
    return {
        "sysname": uname.get("sysname"),
        "release": uname.get("release"),
        "machine": uname.get("machine"),
        "nodename": uname.get("nodename"),
        "cores": None if cores is None else int(cores),
        "memory_bytes": None if mem is None else int(mem),
        "prometheus_version": build.get("version"),
    }


def env_value(environment, name):
    """A variable from a compose service's environment (a map, or a list of NAME=value)."""
    if isinstance(environment, dict):
        return environment.get(name)
    for item in environment or []:
        if isinstance(item, str) and item.startswith(f"{name}="):
            return item.split("=", 1)[1]
    return None


# The answer's comparisons: the terms catalogue.json marks `answer`, by the
# figure the answer reads (the client median; requests/s flat out).
ANSWER_KEYS = {t["key"] for t in TERMS if t.get("answer")}
ANSWER_FIGURES = ("client_p50_ms", "rps")
# Services compose.json has that a run of the paths does not use: make floor's,
# make contract's and the report's own.
NOT_IN_A_RUN = ("floor", "floor-near", "floor-far", "contract", "report", "notrack")
# The watchers make up may leave out, by their Prometheus job.
WATCHER_JOBS = {"cadvisor": "cadvisor", "node-exporter": "node"}


def ran(load, query):
    """The watchers that were up during the run ({service: bool}), from their
    Prometheus job's `up` over the run; {} when the run has no start time."""
    start_ms, phases = load.get("start_ms"), load.get("phases") or []
    if start_ms is None or not phases:
        return {}
    end = start_ms / 1000 + max(p["start_offset_s"] + p["duration_s"] for p in phases)
    span = int(end - start_ms / 1000) + 1
    return {svc: bool(scalar(query, f'max(max_over_time(up{{job="{job}"}}[{span}s] @ {end:.3f}))'))
            for svc, job in WATCHER_JOBS.items()}


def compose_info(compose, gen="k6", up=None):
    """Images and limits from compose.json: the images of the services this run
    used (its generator, not the other; not a watcher that was not up)."""
    services = (compose or {}).get("services") or {}
    limits = {}
    for name in ("app", "nginx", gen):
        s = services.get(name) or {}
        limits[name] = {"cpus": s.get("cpus"), "cpuset": s.get("cpuset") or None, "mem_limit": s.get("mem_limit")}
    limits["nginx"]["worker_processes"] = env_value((services.get("nginx") or {}).get("environment"), "NGINX_WORKER_PROCESSES")
    skip = set(NOT_IN_A_RUN) | (set(GENERATORS) - {gen}) | {svc for svc, was in (up or {}).items() if not was}
    # make up's APP_LO_NOTRACK (services/notrack), recorded as the app's label: "" untouched, "0" or "1".
    notrack = ((services.get("app") or {}).get("labels") or {}).get("uds-lab.lo-notrack") or ""
    return {"images": {n: s.get("image") for n, s in sorted(services.items()) if n not in skip}, "limits": limits,
            "lo_notrack": notrack}


def interleaved_warnings(w, mixed, settings):
    """The interleaved stream's own warnings: the rate not held, failed requests."""
    out = []
    rate, n = settings.get("rate"), sum(v["requests"] for v in mixed["by_path"].values())
    dropped = mixed.get("dropped_iterations") or 0
    # A replayed log (make load TRAFFIC=): each of its requests once on each path, at the log's pace.
    tr = settings.get("traffic")
    planned = tr["cycles"] * len(mixed["by_path"]) if tr else (rate * mixed["duration_s"] if rate else 0)
    if planned and (dropped > MAX_DROPPED_SHARE * planned or n < MIN_RATE_SHARE * planned):
        out.append(warning("saturated", f"`{w}`: the interleaved stream held {n / mixed['duration_s']:,.0f} of "
                           f"{planned / mixed['duration_s']:,.0f} req/s ({dropped} requests dropped): the generator "
                           "or the lab was the limit", interleaved.names(mixed), workload=w))
    late = late_reason(mixed.get("late_rate"))
    if late:
        out.append(warning("saturated", f"`{w}`: the interleaved stream had {late}: the generator, not the paths, "
                           "set the pace", interleaved.names(mixed), workload=w))
    failed = {p: v["failed_rate"] for p, v in mixed["by_path"].items() if v["failed_rate"] > 0}
    if failed:
        out.append(warning("errors", f"`{w}`: failed requests in the interleaved stream: "
                           + ", ".join(f"{p} {r:.2%}" for p, r in failed.items()), interleaved.names(mixed), workload=w))
    return out


def explored(workloads, direct):
    """Every comparison a report judges but the answer's (the answer terms'
    client median, or requests/s flat out: their own family, judged by
    breakdown()): each breakdown term's figures, each path's ratios to tcp,
    and the straight-to-the-app ratios."""
    for wl in workloads.values():
        for key, t in (wl.get("breakdown") or {}).items():
            yield from (d for f, d in t["figures"].items() if not (key in ANSWER_KEYS and f in ANSWER_FIGURES))
        for e in wl["paths"].values():
            yield from (e["ratio_to_tcp"] or {}).values()
    for d in direct.values():
        yield d["ratio"]
        yield from (b["ratio"] for b in d["beside"])


def add_breakdowns(load, phases, workloads, settings):
    """Each workload's interleaved stream (its table) and breakdown (its terms,
    which of them ran back to back); the stream's warnings."""
    warnings = []
    for w in settings.get("workloads") or []:
        mixed = interleaved.mixed_phase(load, w)
        if mixed and w not in workloads:  # INTERLEAVE alone, no phase of one path
            workloads[w] = {"tcp_measured": False, "paths": {}}
        if mixed:
            workloads[w]["interleaved"] = {"paths": interleaved.summary(mixed), "block_s": mixed["block_s"],
                                           "duration_s": mixed["duration_s"], "name": mixed["name"],
                                           "dropped_iterations": mixed.get("dropped_iterations") or 0,
                                           "streams": mixed.get("streams"),
                                           # Each path's median per block (ms): the stream chart.
                                           "blocks": interleaved.blocks(mixed)}
            warnings += interleaved_warnings(w, mixed, settings)
    for w, wl in workloads.items():
        wl["breakdown"] = breakdown(phases, w, figures_for(settings), interleaved.mixed_phase(load, w), is_max(settings),
                                    (load.get("precision") or {}).get("first_stage_rounds"))
        pairs = back_to_back(load, w)
        mark_apart(wl["breakdown"], pairs)
        wl["back_to_back_with_tcp"] = sorted(p for p in wl["paths"] if p != "tcp" and frozenset((p, "tcp")) in pairs)
    return warnings


def run_warnings(load, phases, workloads, settings, gen, generator_cpus):
    """The run's warnings beyond its streams' and its pooling's."""
    warnings = []
    if load.get("start_ms") is None:
        warnings.append(warning("no_start_time", "load.json has no start_ms: Prometheus figures cannot be placed in time", [p["name"] for p in phases]))
    short = [p["name"] for p in phases if (p["window"] and p["window"]["end_s"] - p["window"]["start_s"] < MIN_PHASE_S)]
    if short:
        warnings.append(warning("short_phase", f"phases shorter than {MIN_PHASE_S} s: Prometheus scrapes the app and "
                                "nginx-log-exporter every second, so their server-side figures are missing or rough; "
                                f"use DURATION >= {MIN_PHASE_S}", short))
    if load.get("thresholds_failed"):
        warnings.append(thresholds_warning(gen, load["thresholds_failed"]))
    if is_max(settings) and phases and all(p["figures"].get("generator_cpu_cores") is None for p in phases):
        why = common_reason(phases, "generator_cpu_cores") or "no value"
        warnings.append(warning(
            "generator_cpu_unknown",
            f"{gen}'s CPU is unknown ({why}): nothing rules out that {gen}, not the paths, set these "
            f"limits; {'compare with GENERATOR=wrk or ' if gen != 'wrk' else 'check with '}loadgen/bench_wrk.py",
            [p["name"] for p in phases]))
    # A target rate exists only in rate mode; in max mode the generator sets the pace.
    warnings += phase_warnings(phases, None if is_max(settings) else settings.get("rate"), generator_cpus, gen)
    warnings += ratio_warnings(workloads, settings)
    warnings += figure_warnings(phases)
    return warnings


def answer_workloads(load, phases, workloads, settings, closer, margin_pct):
    """Each workload's verdicts once the report's corrections are done: each
    path's ratio verdict, whether its keepalive paths pooled, its answer (in
    parts and as a paragraph); returns the not_pooled warnings."""
    warnings = []
    for w, wl in workloads.items():
        failed = failures(load, w)  # a path past MAX_FAILED_SHARE gets no verdict and no ratio, in every mode
        for path, e in wl["paths"].items():
            if e["ratio_to_tcp"] is not None and failed_share(failed.get(path)) is not None:
                e["ratio_to_tcp"] = None
                e["verdict"] = f"no ratio: {path} failed {failed_share(failed[path]):.0%} of its requests"
            elif e["ratio_to_tcp"] is not None:
                e["verdict"] = verdict(path, e["ratio_to_tcp"][headline(settings)[0]])
        wl["not_pooled"] = not_pooled(phases, w, closer)
        mixed = interleaved.mixed_phase(load, w)
        wl["answer_parts"] = max_answer_parts(w, phases, settings, wl["not_pooled"], wl["breakdown"], failed) if is_max(
            settings) else answer_parts(
            w, phases, settings, wl["breakdown"], wl["not_pooled"], mixed and mixed["endpoint"], failed, margin_pct)
        wl["answer"] = answer(w, phases, settings, wl["breakdown"], wl["not_pooled"], failed=failed,
                              parts=wl["answer_parts"])
        wl["traffic"] = None if is_max(settings) else traffic.section(load, mixed, TERMS, margin_pct)
        if wl["not_pooled"]:
            words = pooled_words(wl["not_pooled"]).removeprefix("on the ")
            warnings.append(warning("not_pooled", f"`{w}`: the {words}: their comparisons are of new connections, "
                                    "not of pooling", [], workload=w))
    return warnings


def build_report(load, compose, query, prometheus_url=None, margin_pct=None, cluster=None):
    """Everything report.json holds, from the inputs and a query function;
    margin_pct: the answer's equivalence margin (MARGIN; None: .env's default); cluster: a
    Kubernetes run's cluster.json (scripts/k8s.sh), which words why a figure is missing."""
    where = "compose" if cluster is None else "kubernetes"
    margin_pct = read_margin() if margin_pct is None else margin_pct
    settings = load.get("settings") or {}
    machine = machine_info(query)  # first query: a Prometheus that does not answer stops here
    gen = generator(settings)
    comp = compose_info(compose, gen, ran(load, query))
    baseline = idle_baseline(load, query, where)
    cores = server_cores(comp["limits"])
    phases = phase_figures_with(load, query, baseline, cores, where)
    workloads = aggregate(phases, settings)
    app = (compose or {}).get("services", {}).get("app") or {}
    stack = stack_of((app.get("labels") or {}).get("uds-lab.stack"), comp["images"].get("app"))
    app_env = app.get("environment")
    closer = stack if stack and not pools(stack, lambda name: env_value(app_env, name)) else None
    warnings = add_breakdowns(load, phases, workloads, settings)
    # The client straight to the app (make max GENERATOR=oha with the direct paths).
    direct = straight_to_the_app(phases, workloads) if is_max(settings) else {}
    # The report's other comparisons, its exploration: Benjamini-Hochberg among themselves, at their share.
    fdr(explored(workloads, direct), EXPLORE_ALPHA)
    rejudge(direct)
    warnings += answer_workloads(load, phases, workloads, settings, closer, margin_pct)
    warnings += run_warnings(load, phases, workloads, settings, gen, number(comp["limits"][gen]["cpus"]))
    templates = server_queries("<path>", 0, 0.0)
    return {
        "testid": load.get("testid"),
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "prometheus": prometheus_url,
        "start_ms": load.get("start_ms"),
        "gap_s": load.get("gap_s"),
        "idle_baseline": baseline,
        "server_cores": {"cores": cores[0], "missing": cores[1]},
        "settings": settings,
        "machine": machine,
        "compose": comp,
        "stack": stack,
        "totals": load.get("totals"),
        "thresholds_failed": load.get("thresholds_failed") or [],
        "precision": load.get("precision"),
        "phases": phases,
        "workloads": workloads,
        "direct": direct,
        "generator": gen,
        "mode": settings.get("mode") or "rate",
        "headline": headline(settings),
        "margin_pct": margin_pct,
        "warnings": warnings,
        "charts": [],
        "queries": {**{k: v.replace("[0s] @ 0.000", "[<duration>s] @ <window end>") for k, v in templates.items()},
                    "idle_ctx_switches": "node_context_switches_total[<idle length>s] @ <idle end> (raw samples)"},
    }


# openloop's threshold on a phase whose load did not go out: thresholds_failed
# names it "dropped_iterations:<phase>" (loadgen/openloop/summary.go).
DROPPED_THRESHOLD = "dropped_iterations:"


def thresholds_warning(gen, failed):
    """The generator's failed thresholds in words, naming each phase whose load did not go out."""
    phases = [t.removeprefix(DROPPED_THRESHOLD) for t in failed if t.startswith(DROPPED_THRESHOLD)]
    says = [t for t in failed if not t.startswith(DROPPED_THRESHOLD)]
    if phases:
        says.append(f"the load of {', '.join(phases)} did not go out (more than 1% of its requests dropped, not sent: "
                    "the generator's in-flight cap was reached): the run failed")
    return warning("generator_thresholds", f"{gen}'s thresholds failed: {'; '.join(says)}", phases)
