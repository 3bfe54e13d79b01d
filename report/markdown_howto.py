"""report.md's "How to read this" (pure rendering), from the constants and
the methods the code uses."""
from report.breakdown import MAX_FAILED_SHARE
from report.interleaved import MIN_BLOCK_REQUESTS, MIN_BLOCKS, dof
from report.lab import margin_pct
from report.stats import ALPHA, ANSWER_ALPHA, CONFIDENCE, EXPLORE_ALPHA
from report.verdicts import MIN_DOF_TO_PROJECT, POWER
from report.warnings import (MAX_DROPPED_SHARE, MAX_GENERATOR_CPU_SHARE, MAX_LATE_SHARE, MIN_PHASE_S, MIN_RATE_SHARE,
                             SAME_CEILING)

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


def how_to_read(rep):
    """report.md's "How to read this": what each figure is and how it is
    judged, written from the constants and methods the code uses."""
    return [
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
