"""The report's warnings (pure), each threshold stated in its "How to read this"."""
from report.queries import NO_NGINX, UNPINNED
from report.values import METRICS, generator, is_max

# Warning thresholds (each stated in the report's "How to read this").
MIN_RATE_SHARE = 0.95  # achieved requests/s below this share of RATE: the generator did not hold the rate
# Dropped iterations above this share of a phase's iterations (requests + dropped):
# the generator could not start requests on time. A few in thousands are
# scheduling hiccups, shown in the table, not a saturated generator.
MAX_DROPPED_SHARE = 0.01
# openloop: requests sent more than 1 ms behind their due time, above this
# share of a phase's: the generator, not the path, set the pace. Not 1%: on
# a 2-core machine with nothing pinned, a generator that keeps up sends 1-2%
# of its requests a little over 1 ms late while nginx and the app take the
# cores (the test bed's e2e runs at 100 req/s), and a warning on every clean
# run teaches readers to skip the warnings.
MAX_LATE_SHARE = 0.05
MAX_GENERATOR_CPU_SHARE = 0.90  # the generator at or above this share of its CPU limit: it was busy
MIN_PHASE_S = 5  # five scrapes of the app and nginx-log-exporter (prometheus.yml: every 1 s); node-exporter and
# cAdvisor (5 s) are read from the samples around a shorter window
CONNTRACK_FULL = 0.8  # the share of nf_conntrack_max past which the report warns
SAME_CEILING = 1.05  # max mode: every path within 5% of the others: one ceiling, likely the generator's


def figure_warnings(phases):
    """Figures missing for a reason the user can act on (a collector left
    out, labelling nothing, or sampling too seldom) and a connection-tracking
    table near full; nothing counted in a window (no requests, no new upstream
    connection on a pooled path) is not a warning, nor a figure read from the
    samples around its window (the tables mark it: estimated())."""
    out = []
    groups = {}
    for p in phases:
        for f, why in (p.get("missing") or {}).items():
            if why.endswith(" in the window") or why in ("load.json has no start time", UNPINNED, NO_NGINX):
                continue
            if f.startswith("conntrack_") or f == "app_conns_per_req":
                continue  # optional: a namespace without tracking, or an app without the lab's metrics
            groups.setdefault((f, why), []).append(p["name"])
    full = []
    for p in phases:
        fill = (p.get("figures") or {}).get("conntrack_fill")
        if fill is not None and fill >= CONNTRACK_FULL:
            full.append((p["name"], fill))
    if full:
        out.append(warning("conntrack_full", f"the app's network namespace's connection-tracking table reached "
                           f"{max(f for _, f in full):.0%} of its limit: when it is full, new connections are "
                           "dropped (entries outlive their TCP connection by 120 s; fewer new connections, a "
                           "shorter run, or a larger nf_conntrack_max)", [n for n, _ in full]))
    for (f, why), names in groups.items():
        out.append(warning("missing_figures", f"{METRICS[f][0]}: n/a in {len(names)} of {len(phases)} phases: {why}", names))
    return out


def warning(kind, message, phases, workload=None, path=None):
    return {"kind": kind, "workload": workload, "path": path, "phases": phases, "message": message}


def late_reason(share):
    """Why a phase's late requests make the generator the limit, or None."""
    if share is not None and share > MAX_LATE_SHARE:
        return f"{share:.1%} of requests sent over 1 ms late (> {MAX_LATE_SHARE:.0%})"
    return None


def saturation_reasons(fig, rate, generator_cpus, gen="openloop"):
    reasons = []
    dropped = fig.get("dropped_iterations") or 0
    planned = dropped + (fig.get("requests") or 0)
    if planned and dropped / planned > MAX_DROPPED_SHARE:
        reasons.append(f"{dropped:.0f} dropped requests ({dropped / planned:.1%} > {MAX_DROPPED_SHARE:.0%})")
    if late_reason(fig.get("late_rate")):
        reasons.append(late_reason(fig.get("late_rate")))
    if rate and fig.get("rps") is not None and fig["rps"] < MIN_RATE_SHARE * rate:
        reasons.append(f"{fig['rps']:.1f} req/s < {MIN_RATE_SHARE:.0%} of RATE {rate}")
    cores = fig.get("generator_cpu_cores")
    if generator_cpus and cores is not None and cores >= MAX_GENERATOR_CPU_SHARE * generator_cpus:
        reasons.append(f"{gen} used {cores:.2f} of its {generator_cpus:g} CPUs")
    return reasons


def error_reasons(fig, gen="openloop"):
    reasons = []
    if (fig.get("failed_rate") or 0) > 0:
        reasons.append(f"{gen} failed {fig['failed_rate']:.2%}")
    if (fig.get("nginx_5xx") or 0) > 0:
        reasons.append(f"nginx 5xx {fig['nginx_5xx']:.0f}")
    return reasons


def phase_warnings(phases, rate, generator_cpus, gen="openloop"):
    """Saturation and errors, one warning per workload and path listing its phases."""
    out = []
    groups = {}
    for p in phases:
        groups.setdefault((p["workload"], p["path"]), []).append(p)
    for (w, path), ps in groups.items():
        for kind, reasons_of, message in (
            ("saturated", lambda f: saturation_reasons(f, rate, generator_cpus, gen), f"{gen} was the limit: figures describe {gen}, not the path"),
            ("errors", lambda f: error_reasons(f, gen), "errors: this path's figures are not comparable"),
        ):
            hit = [(p["name"], reasons_of(p["figures"])) for p in ps]
            hit = [(n, r) for n, r in hit if r]
            if hit:
                detail = "; ".join(f"{n}: {', '.join(r)}" for n, r in hit)
                out.append(warning(kind, f"{message} ({detail})", [n for n, _ in hit], w, path))
    return out


def estimated(phases, workload):
    """{figure: (phases estimated, phases)} of a workload's figures read from
    the samples around their window (a collector sampling less often than the
    phase is long): an estimate, which its table says under it."""
    mine = [p for p in phases if p["workload"] == workload]
    out = {}
    for p in mine:
        for f in p.get("estimated") or []:
            out[f] = out.get(f, 0) + 1
    return {f: (n, len(mine)) for f, n in out.items()}


def ratio_warnings(workloads, settings):
    """Max mode: every path at the same ceiling, likely the generator's. The
    ratios' own limits (tcp not measured, one round, an interval that includes
    1 or that a correction took back) are said in their table, not here."""
    out = []
    gen = generator(settings)
    if not is_max(settings):
        return out
    for w, wl in workloads.items():
        rps = [e["mean"]["rps"] for e in wl["paths"].values() if e["mean"]["rps"]]
        if len(rps) > 1 and max(rps) / min(rps) < SAME_CEILING:
            out.append(warning(
                "same_ceiling",
                f"every path reached the same ceiling ({min(rps):.0f}-{max(rps):.0f} req/s): that is likely {gen}'s "
                f"limit, not the paths'; give {gen} more CPU" + ("" if gen == "wrk" else " or use wrk (GENERATOR=wrk)"),
                [n for e in wl["paths"].values() for n in e["phases"]], w))
    return out
