#!/usr/bin/env python3
"""Writes grafana/dashboards/*.json: classic Grafana dashboard JSON (Grafana 13
file provisioning rejects the v2 schema), built from a few panel helpers
instead of hand-copied panel blocks.

    make dashboards                                       # write the files
    PYTHONPATH=. python3 grafana/dashboards.py --check    # fail if they are not up to date

It imports the report package (the repository's root on PYTHONPATH, as make
sets it): the catalogue, the path colours and the PromQL selectors are the
report's too.
"""
import json
import re
import sys
from pathlib import Path

from report.lab import APP, BASELINE, CATALOGUE, GENERATORS, LOAD, PATH_COLOURS, SILENT_GENERATORS, words
from report.lab import service as svc

OUT = Path(__file__).resolve().parent / "dashboards"
# The uid provisioned in grafana/provisioning/datasources/prometheus.yaml.
DS = {"type": "prometheus", "uid": "uds-lab-prometheus"}

# Label selectors of the dashboards' own variables, each naming its job: a
# series of the same name from another target (the app under test) is not
# the generator's or nginx's.
GEN = 'job="openloop", testid=~"$testid", path=~"$path"'
NGX = 'job="nginx-log", path=~"$path"'
# Either load generator's container in cAdvisor (only one runs at a time).
LOADGEN = f'container_label_com_docker_compose_service=~"{"|".join(GENERATORS)}"'
# The generators in words: any of them, and those that push nothing to Prometheus.
ANY_GEN, SILENT = words(GENERATORS), words(SILENT_GENERATORS, "and")

# One colour per path (the catalogue's, as in the report) and per listener, the same on every panel.
COLOURS = {
    **PATH_COLOURS,
    "unix": "green", "app": "purple", "nginx": "yellow", "openloop": "light-blue",
}


def target(expr, legend, instant=False):
    return {"expr": expr, "legendFormat": legend, "instant": instant, "range": not instant}


def _targets(targets):
    return [{"refId": chr(ord("A") + i), "datasource": DS, **t} for i, t in enumerate(targets)]


def _colour_overrides():
    return [
        {
            "matcher": {"id": "byName", "options": name},
            "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": colour}}],
        }
        for name, colour in COLOURS.items()
    ]


# Said under every panel that reads the app's own metrics: they are optional
# (make contract), so an app may leave the panel empty.
APP_METRICS_NOTE = (" Empty for an app that exports no metrics (they are optional: make contract lists the panels "
                    "an app leaves empty); the paths are then compared from nginx's and the load generator's side.")


APP_QUERY = re.compile(r'\bapp_[a-z_]+\{|\{job="app"')


def _describe(description, targets):
    """The description, with APP_METRICS_NOTE where a query reads the app's metrics."""
    if any(APP_QUERY.search(t.get("expr", "")) for t in targets):
        return description + APP_METRICS_NOTE
    return description


def timeseries(title, description, targets, unit, w=12, h=8, stack=False, log=False):
    return {
        "type": "timeseries",
        "title": title,
        "description": _describe(description, targets),
        "datasource": DS,
        "gridPos": {"w": w, "h": h},
        "fieldConfig": {
            "defaults": {
                "unit": unit,
                "min": 0,
                "custom": {
                    "lineWidth": 2,
                    "fillOpacity": 20 if stack else 5,
                    "stacking": {"mode": "normal" if stack else "none"},
                    "spanNulls": False,
                    **({"scaleDistribution": {"type": "log", "log": 10}} if log else {}),
                },
            },
            "overrides": _colour_overrides(),
        },
        "options": {
            "legend": {"displayMode": "table", "placement": "bottom", "calcs": ["mean", "max", "lastNotNull"]},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": _targets(targets),
    }


def stat(title, description, targets, unit, w=12, h=5, decimals=2):
    """Instant values over the dashboard's whole time range ($__range); last-not-null, never mean."""
    return {
        "type": "stat",
        "title": title,
        "description": _describe(description, targets),
        "datasource": DS,
        "gridPos": {"w": w, "h": h},
        "fieldConfig": {
            "defaults": {"unit": unit, "decimals": decimals, "color": {"mode": "fixed", "fixedColor": "text"}},
            "overrides": _colour_overrides(),
        },
        "options": {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "none",
            "textMode": "value_and_name",
            "orientation": "vertical",
        },
        "targets": _targets([{**t, "instant": True, "range": False} for t in targets]),
    }


def text(title, content, w=24, h=4):
    return {"type": "text", "title": title, "gridPos": {"w": w, "h": h}, "options": {"mode": "markdown", "content": content}}


def row(title):
    return {"type": "row", "title": title, "collapsed": False, "gridPos": {"w": 24, "h": 1}, "panels": []}


def query_var(name, label, query):
    return {
        "type": "query",
        "name": name,
        "label": label,
        "datasource": DS,
        "query": {"query": query, "refId": name},
        "definition": query,
        "refresh": 2,
        "multi": True,
        "includeAll": True,
        "allValue": ".*",
        "current": {"text": "All", "value": "$__all"},
        "sort": 1,
    }


# The cores nginx and the app are pinned to (NGINX_CPUSET and APP_CPUSET, as a
# regex): the kernel-time panels read only those cores' time. All by default.
CORES = {
    "type": "textbox",
    "name": "cores",
    "label": "Server cores (NGINX_CPUSET, APP_CPUSET as a regex, e.g. 0 or 0|1)",
    "query": ".*",
    "current": {"text": ".*", "value": ".*"},
}

TESTID = query_var("testid", "Test run", 'label_values(openloop_requests_total{job="openloop"}, testid)')
PATH = query_var("path", "Path", 'label_values(openloop_requests_total{job="openloop"}, path)')


def layout(panels):
    """Places panels left to right, wrapping at 24 columns, and numbers them."""
    x = y = row_h = 0
    for i, p in enumerate(panels, start=1):
        w, h = p["gridPos"]["w"], p["gridPos"]["h"]
        if x + w > 24 or p["type"] == "row":
            x, y, row_h = 0, y + row_h, 0
        p["gridPos"].update({"x": x, "y": y})
        p["id"] = i
        x, row_h = x + w, max(row_h, h)
    return panels


# Each phase of a run as a region on the time axis, named by path and round.
PHASES = {
    "name": "Phases (openloop)",
    "datasource": DS,
    "enable": True,
    "iconColor": "rgba(138, 184, 255, 0.6)",
    "expr": 'sum by (path, round) (rate(openloop_requests_total{job="openloop", testid=~"$testid"}[15s])) > 0',
    "step": "5s",
    "titleFormat": "{{path}} round {{round}}",
    "tagKeys": "path,round",
    "useValueForTime": False,
}


# A sweep's steps (make sweep with openloop): each step a region, named by its level.
SWEEP_STEPS = {
    "name": "Sweep steps (openloop)",
    "datasource": DS,
    "enable": True,
    "iconColor": "rgba(255, 152, 48, 0.6)",
    "expr": 'sum by (step, level) (rate(openloop_requests_total{job="openloop", testid=~"$testid", step!=""}[15s])) > 0',
    "step": "5s",
    "titleFormat": "sweep step {{step}}: {{level}}",
    "tagKeys": "step,level",
    "useValueForTime": False,
}
# The sweep row's panels: their titles start so (the e2e checks them on a sweep run).
SWEEP_TITLE = "Sweep: "


def dashboard(uid, title, description, panels, variables, links=True, annotations=()):
    return {
        "id": None,
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["uds-lab"],
        "editable": False,
        "schemaVersion": 41,
        "graphTooltip": 1,
        "time": {"from": "now-15m", "to": "now"},
        "refresh": "10s",
        "timezone": "browser",
        "links": [{"type": "dashboards", "tags": ["uds-lab"], "asDropdown": False, "title": "uds-lab", "includeVars": True, "keepTime": True}]
        if links
        else [],
        "templating": {"list": variables},
        "annotations": {"list": list(annotations)},
        "panels": layout(panels),
    }


def or_zero(expr, like):
    """expr, or 0 for every series of `like`: a counter of failures has no series
    until the first failure, and an empty panel reads as "no data", not "none"."""
    return f"({expr}) or ({like} * 0)"


def quantiles(metric, sel, by, qs=(0.5, 0.95, 0.99), classic=False):
    """histogram_quantile targets over a native histogram, one per quantile; with
    classic, falling back to classic buckets (what a swapped-in app may expose)."""
    def expr(q):
        e = f"histogram_quantile({q}, sum by ({by}) (rate({metric}{{{sel}}}[$__rate_interval])))"
        if classic:
            e += f" or histogram_quantile({q}, sum by ({by}, le) (rate({metric}_bucket{{{sel}}}[$__rate_interval])))"
        return e

    return [target(expr(q), f"{{{{{by}}}}} p{round(q * 100)}") for q in qs]


def by_active_path(expr):
    """A cost with no path label (a whole process's or container's), shown as the
    path the generator was driving at that moment (the one with the most of its
    requests in the window), so each path has its own colour. Only one path runs at a time."""
    active = f"topk(1, sum by (path) (rate(openloop_requests_total{{{GEN}}}[$__rate_interval])))"
    return target(f"0 * {active} + on() group_left() ({expr})", "{{path}}")


# Measured phases only: the warm-up phases stay out, as in the report.
MEASURED = 'phase="measure"'


def p50_of(path):
    h = "openloop_request_duration_seconds"
    return f'histogram_quantile(0.5, sum(rate({h}{{job="openloop", testid=~"$testid", {MEASURED}, path="{path}"}}[$__range])))'


def breakdown_targets():
    """The catalogue's breakdown terms: one path's client p50 minus another's over
    the time range, in seconds, less the difference of two more where a term
    says so (a term whose paths did not run has no value)."""
    out = []
    # The dashboards are compose's: a Kubernetes stand-in term (instead_of) has
    # nothing to stand in for there.
    for t in (t for t in CATALOGUE["breakdown"]["terms"] if not t.get("instead_of")):
        (a, b), less = t["paths"], t.get("less")
        expr = f"{p50_of(a)} - {p50_of(b)}"
        if less:
            expr = f"({expr}) - ({p50_of(less[0])} - {p50_of(less[1])})"
        out.append(target(expr, f"{t['label']} ({a} − {b}{f' − ({less[0]} − {less[1]})' if less else ''})"))
    return out


def ratio_to_tcp(q):
    """Each path's client latency quantile over the whole range, divided by the baseline's."""
    h = "openloop_request_duration_seconds"
    return target(
        f'histogram_quantile({q}, sum by (path) (rate({h}{{job="openloop", testid=~"$testid", {MEASURED}}}[$__range])))'
        f' / on() group_left() histogram_quantile({q}, sum(rate({h}{{job="openloop", testid=~"$testid", {MEASURED}, '
        f'path="{BASELINE}"}}[$__range])))',
        "{{path}}",
    )


# The paths dashboard's shared selectors: the app's load requests, the requests either
# nginx handled on the lab's paths (both log to nginx-log-exporter), both nginx's containers.
PER_REQ = f"sum(rate(app_http_requests_total{{{LOAD}}}[$__rate_interval]))"
NGINX_REQ = 'sum(rate(nginx_location_requests_total{job="nginx-log", path!="other"}[$__rate_interval]))'
NGINX_SVCS = f'container_label_com_docker_compose_service=~"{"|".join(CATALOGUE["nginx"])}"'


def intro_panels():
    """The dashboard's opening text."""
    return [
        text(
            "How to read this dashboard",
            "nginx reaches the **same app** by several paths: `tcp` (TCP **across the Docker bridge**), `tcp-lo` "
            "(TCP **over loopback**, from `nginx-lo`, the same nginx in the app's network namespace, as a sidecar in "
            "a pod) and `uds` (the **Unix socket** in a shared volume), each with a **new upstream connection per "
            "request** or, with `-ka`, **pooled keepalive connections**; `uds-lo` is the socket through nginx-lo, "
            "so that the socket and TCP over loopback are compared through the same nginx. `make load` first sends every path in one interleaved arrival stream "
            "(the answer's latency: every path at once on the time axis), then one path at a time at the same rate "
            "for the costs per request, each phase annotated. *Where the time goes* splits the difference into connection setup, the bridge and the TCP stack. "
            "Pick a run in *Test run*. Every figure here is a point estimate over the time range, to explore: "
            "`make report` judges them (intervals, corrected for the many comparisons).",
            h=5,
        ),
    ]


def against_tcp_panels():
    """Each path against tcp over the whole time range: ratios and where the time goes."""
    return [
        row("Each path against tcp (whole time range)"),
        stat(
            "Client latency p50, ratio to tcp",
            "Median duration of the generator's successful requests over the selected time range, divided by the tcp path's. "
            "Below 1: faster than TCP with a new connection per request. Needs a run that covered tcp.",
            [ratio_to_tcp(0.5)],
            "none",
        ),
        stat(
            "Client latency p99, ratio to tcp",
            "The same for the 99th percentile: tails are where connection setup and queueing show first.",
            [ratio_to_tcp(0.99)],
            "none",
        ),
        stat(
            "Where the time goes: client p50 difference",
            "One path's median latency minus another's over the time range (catalogue.json's breakdown): "
            "the TCP stack against the socket through one nginx (tcp-lo minus uds-lo; tcp minus uds), connection "
            "setup (a path minus its -ka twin), the Docker bridge (tcp minus tcp-lo, less uds minus uds-lo: the "
            "two nginx's own difference) and the controls (uds minus uds-lo: the two nginx alone). Warm-up phases "
            "left out. One figure over the whole range, no interval: `make report` says which differences are "
            "measurable.",
            breakdown_targets(),
            "s",
            w=24,
            h=6,
            decimals=1,
        ),
    ]


def load_and_latency_panels():
    """Requests/s, latency and errors per path."""
    return [
        row("Load and latency"),
        timeseries(
            "Requests/s per path (openloop)",
            "Requests the generator completed per second. At a fixed rate each path should hold RATE while it runs; "
            "one below it could not keep up, or the generator could not (see the load generator dashboard).",
            [target(f"sum by (path) (rate(openloop_requests_total{{{GEN}}}[$__rate_interval]))", "{{path}}")],
            "reqps",
        ),
        timeseries(
            "Client latency per path (openloop): p50, p95, p99",
            "Successful requests' duration as the client sees it (nginx, the hop to the app, the app), from its "
            "actual send, per time window from the generator's native histograms.",
            quantiles("openloop_request_duration_seconds", GEN, "path"),
            "s",
        ),
        timeseries(
            "App latency per listener: p50, p99",
            "Time the app itself spent on a request, from its own histogram. It barely depends on the listener: a "
            "gap the client sees but the app does not lies in the connection and the hop.",
            quantiles("app_http_request_duration_seconds", f"{APP}, {LOAD}", "listener", qs=(0.5, 0.99), classic=True),
            "s",
        ),
        timeseries(
            "Errors per path",
            "The generator's failed requests per second (not 2xx/3xx, or no response) and nginx's 5xx answers per "
            "location. Anything above zero makes that path's figures incomparable. nginx's 502, 503 and 504 series "
            "exist from the start, so a short outage shows; the generator creates a status's series at its first "
            "request, so its first burst may not (rate() needs an earlier sample): trust nginx's line for that.",
            [
                target(
                    or_zero(
                        f'sum by (path) (rate(openloop_requests_total{{{GEN}, status!~"[23].."}}[$__rate_interval]))',
                        f"sum by (path) (rate(openloop_requests_total{{{GEN}}}[$__rate_interval]))",
                    ),
                    "openloop {{path}}",
                ),
                target(
                    or_zero(
                        f'sum by (path) (rate(nginx_location_requests_total{{{NGX}, status=~"5.."}}[$__rate_interval]))',
                        f"sum by (path) (rate(nginx_location_requests_total{{{NGX}}}[$__rate_interval]))",
                    ),
                    "nginx 5xx {{path}}",
                ),
            ],
            "reqps",
        ),
    ]


def inside_nginx_panels():
    """nginx's own view from its access log."""
    return [
        row("Inside nginx (access log; millisecond resolution)"),
        timeseries(
            "nginx upstream connect time per path (mean)",
            "Time nginx took to open the upstream connection (nginx's upstream_connect_time). On the keepalive paths a "
            "reused connection costs 0. nginx reports milliseconds, so sub-millisecond connects read as 0 and the "
            "mean only moves under load or queueing; the client and app panels have microsecond resolution.",
            [
                target(
                    f"sum by (path) (rate(nginx_location_upstream_connect_seconds_sum{{{NGX}}}[$__rate_interval]))"
                    f" / sum by (path) (rate(nginx_location_upstream_connect_seconds_count{{{NGX}}}[$__rate_interval]))",
                    "{{path}}",
                )
            ],
            "s",
        ),
        timeseries(
            "nginx upstream header time per path (mean)",
            "From opening the upstream connection to the app's response headers (nginx's upstream_header_time): connect + "
            "send + the app's work. Millisecond resolution.",
            [
                target(
                    f"sum by (path) (rate(nginx_location_upstream_header_seconds_sum{{{NGX}}}[$__rate_interval]))"
                    f" / sum by (path) (rate(nginx_location_upstream_header_seconds_count{{{NGX}}}[$__rate_interval]))",
                    "{{path}}",
                )
            ],
            "s",
        ),
    ]


def cost_per_request_panels():
    """What a request costs the app, nginx and the host's cores."""
    return [
        row("Cost per request"),
        timeseries(
            "App CPU per request",
            "CPU microseconds the app's process used per request it served (process CPU rate / request rate). "
            "Accepting a connection per request costs the app CPU that keepalive saves.",
            [by_active_path(f"1e6 * sum(rate(process_cpu_seconds_total{{{APP}}}[$__rate_interval])) / {PER_REQ}")],
            "µs",
        ),
        timeseries(
            "App context switches per request",
            "The app process's own context switches (app_process_context_switches_total from getrusage: voluntary, "
            "when it blocks on a socket, plus involuntary) per request it served, coloured by the path the generator was "
            "driving: what the path makes the app do, without the host's background. Empty for an app that does "
            "not export the metric.",
            [by_active_path(f"sum(rate(app_process_context_switches_total{{{APP}}}[$__rate_interval])) / {PER_REQ}")],
            "short",
        ),
        timeseries(
            "nginx CPU per request (cAdvisor)",
            "CPU microseconds the nginx containers (nginx and nginx-lo: one is busy at a time) used per request "
            "they handled (cAdvisor CPU rate / access-log request rate), coloured by the path the generator was driving. Opening "
            "upstream connections is nginx's main extra cost on the new-connection paths.",
            [by_active_path(f"1e6 * sum(rate(container_cpu_usage_seconds_total{{{NGINX_SVCS}}}[$__rate_interval])) / {NGINX_REQ}")],
            "µs",
        ),
        timeseries(
            "Context switches per request (host)",
            "The whole host's context switches per request nginx handled, coloured by the path the generator was driving. The "
            "host's background (Prometheus, Docker, the generator: tens per request at 500 req/s) is counted too, so paths "
            "differ little here: see App context switches per request, and the report's figure above the run's "
            "idle baseline.",
            [by_active_path(f"sum(rate(node_context_switches_total[$__rate_interval])) / {NGINX_REQ}")],
            "short",
        ),
        *[timeseries(
            f"{title} per request on the server cores",
            f"The {title.lower()} time of the cores in Server cores (set it to NGINX_CPUSET and APP_CPUSET: with "
            "nothing else pinned there, it is nginx's, the app's and the kernel's work for them) per request nginx "
            f"handled, coloured by the path the generator was driving. {why} The report gives the same per phase, with "
            "intervals, when the lab is pinned.",
            [by_active_path(f'1e6 * sum(rate(node_cpu_seconds_total{{mode="{mode}",cpu=~"$cores"}}[$__rate_interval])) / {NGINX_REQ}')],
            "µs",
        ) for title, mode, why in (
            ("Softirq", "softirq", "Packets through the TCP/IP stack, the veth pair and the bridge: charged reliably "
             "to no container, and what the socket saves most."),
            ("System", "system", "System calls: connect, accept, send and receive, close."),
        )],
    ]


def connection_panels():
    """What a new connection per request leaves behind: conntrack entries, upstream connects, TIME_WAIT."""
    return [
        timeseries(
            "Connection tracking in the app's network namespace",
            "Entries in the app's namespace's connection-tracking table and its limit (the lab's app exports them). "
            "Docker's embedded DNS puts NAT rules in every container's namespace and with them tracking: each new "
            "TCP connection to the app is an entry for 120 s (TIME_WAIT); the socket's are none. A full table drops "
            "new connections.",
            [target(f"app_netns_conntrack_entries{{{APP}}}", "entries"),
             target(f"app_netns_conntrack_entries_limit{{{APP}}}", "limit"),
             target(f"increase(app_netns_conntrack_drops_total{{{APP}}}[$__rate_interval])", "dropped")],
            "short",
        ),
        timeseries(
            "New upstream connections/s per listener",
            "Connections the app accepted per second, by listener and peer: TCP from across the bridge (nginx: "
            "network) or from loopback (nginx-lo), and the socket (local). On the new-connection paths this equals "
            "the request rate; on the keepalive paths it drops to nearly zero.",
            [target(f"sum by (listener, peer) (rate(app_connections_accepted_total{{{APP}}}[$__rate_interval]))", "{{listener}} {{peer}}")],
            "cps",
        ),
        timeseries(
            "TCP sockets in TIME_WAIT (app's network namespace)",
            "With a new connection per request the app closes first, so every /tcp/ request leaves a socket in "
            "TIME_WAIT for 60 s: at 1000 req/s that is ~60,000 sockets. The Unix socket and keepalive leave none.",
            [target(f'app_netns_tcp_sockets{{{APP}, state="tw"}}', "TIME_WAIT")],
            "short",
        ),
    ]


def sweep_panels():
    """A sweep's steps: requests/s and latency at each rate, and memory."""
    return [
        row("A sweep (make sweep): each path at rising rates"),
        timeseries(
            f"{SWEEP_TITLE}requests/s per path at each step",
            "make sweep holds each step's rate on every path in turn (openloop's open loop; the steps are "
            "annotated): a path below its step's level could not keep up there. A sweep of connections runs wrk, "
            "which reports to make report only. make report gives each step with its interval, each path's knee "
            "and how it failed.",
            [target(f'sum by (path, level) (rate(openloop_requests_total{{{GEN}, {MEASURED}, level!=""}}[$__rate_interval]))',
                    "{{path}} at {{level}}")],
            "reqps",
        ),
        timeseries(
            f"{SWEEP_TITLE}client p50 and p99 per path at each step (log)",
            "The client's latency as each step's rate rises: the median stays flat while a path has headroom; the "
            "p99 climbs first, where queueing starts (the knee).",
            [target(f'histogram_quantile({q}, sum by (path, level) (rate(openloop_request_duration_seconds{{{GEN}, '
                    f'{MEASURED}, level!=""}}[$__rate_interval])))', f"{{{{path}}}} p{round(q * 100)} at {{{{level}}}}")
             for q in (0.5, 0.99)],
            "s",
            log=True,
        ),
        timeseries(
            "Memory",
            "The app's resident memory (its own process metrics) and the nginx container's working set (cAdvisor).",
            [
                target(f"process_resident_memory_bytes{{{APP}}}", "app"),
                target(f"sum(container_memory_working_set_bytes{{{svc('nginx')}}})", "nginx"),
                target(f"sum(container_memory_working_set_bytes{{{svc('nginx-lo')}}})", "nginx-lo"),
            ],
            "bytes",
        ),
    ]


def paths_dashboard():
    panels = (intro_panels() + against_tcp_panels() + load_and_latency_panels() + inside_nginx_panels()
              + cost_per_request_panels() + connection_panels() + sweep_panels())
    return dashboard(
        "uds-lab-paths",
        "uds-lab: paths compared",
        "TCP across the bridge, TCP over loopback and the Unix socket between nginx and the app, with and "
        "without upstream keepalive, and where the time goes.",
        panels,
        [TESTID, PATH, CORES],
        annotations=[PHASES, SWEEP_STEPS],
    )


# cAdvisor's label of a container's compose service.
BY_SERVICE = "container_label_com_docker_compose_service"


def client_panels():
    """What the generator drove: requests per path, late and dropped requests, requests in flight."""
    return [
        text(
            "Is the client the limit?",
            "A benchmark measures the server only while the load generator keeps up. If openloop sends requests "
            f"late or drops them, or the generator ({ANY_GEN}) uses all the CPU it was given (`LOADGEN_CPUS`), the "
            "figures on the other dashboards describe the generator, not the paths: lower `RATE` or give it more CPU. "
            f"**{SILENT}** (`make max`, ...) send nothing to Prometheus (their figures are in the run's `load.json` "
            "and report), nor does k6 to these panels (its own series, by remote write): for them, read their CPU, "
            "their throttling and nginx's requests per path; the panels marked *openloop* and the *Test run* list "
            "stay empty.",
            h=4,
        ),
        timeseries(
            "Requests/s per path vs requests dropped (openloop)",
            "Completed requests per second per path, and requests due but never sent because "
            "every connection of their path was busy (OPENLOOP_CONNECTIONS): any drop means the fixed rate was not held. Empty under "
            f"{SILENT}: see nginx's requests per path beside it.",
            [
                target(f"sum by (path) (rate(openloop_requests_total{{{GEN}}}[$__rate_interval]))", "{{path}}"),
                target(
                    or_zero(
                        f"sum by (path) (rate(openloop_dropped_requests_total{{{GEN}}}[$__rate_interval]))",
                        f"sum by (path) (rate(openloop_requests_total{{{GEN}}}[$__rate_interval]))",
                    ),
                    "dropped {{path}}",
                ),
            ],
            "reqps",
        ),
        timeseries(
            "Requests/s per path as nginx logged them (any generator)",
            "Requests both nginx handled per path (their access log, nginx-log-exporter), whichever generator sent "
            "them: the throughput wrk reached, phase by phase. Empty with NGINX_ACCESS_LOG=off.",
            [target(f'sum by (path) (rate(nginx_location_requests_total{{{NGX}, path!="other"}}[$__rate_interval]))', "{{path}}")],
            "reqps",
        ),
        timeseries(
            "Requests in flight (openloop)",
            "Requests sent and not yet come back: rate × latency. Open loop, it grows without bound when a path "
            "stalls, up to OPENLOOP_CONNECTIONS a path (one request a connection), past which requests are dropped. wrk keeps CONNECTIONS "
            "connections busy for a whole phase instead.",
            [target('sum(openloop_requests_in_flight{job="openloop", testid=~"$testid"})', "in flight")],
            "short",
        ),
    ]


def generator_cpu_panels():
    """The generator's own CPU against its limit, its throttling, and its connection time."""
    return [
        timeseries(
            "Load generator CPU vs its limit (cAdvisor)",
            f"CPU cores the generator's container used ({ANY_GEN}, one at a time), and its limit (LOADGEN_CPUS). "
            "Near the limit, the generator's own timing inflates latency and caps the rate.",
            [
                target(f"sum by ({BY_SERVICE}) (rate(container_cpu_usage_seconds_total{{{LOADGEN}}}[$__rate_interval]))",
                       f"{{{{{BY_SERVICE}}}}}"),
                target(f"max by ({BY_SERVICE}) (container_spec_cpu_quota{{{LOADGEN}}} / container_spec_cpu_period{{{LOADGEN}}})",
                       f"{{{{{BY_SERVICE}}}}} limit"),
            ],
            "short",
        ),
        timeseries(
            "Load generator throttled by its CPU limit (cAdvisor)",
            f"Share of CPU periods in which the kernel throttled the generator (CFS quota), {ANY_GEN}. Above a few "
            "percent, its clock and pace suffer.",
            [
                target(
                    f"sum by ({BY_SERVICE}) (rate(container_cpu_cfs_throttled_periods_total{{{LOADGEN}}}[$__rate_interval]))"
                    f" / sum by ({BY_SERVICE}) (rate(container_cpu_cfs_periods_total{{{LOADGEN}}}[$__rate_interval]))",
                    f"{{{{{BY_SERVICE}}}}}",
                )
            ],
            "percentunit",
        ),
        timeseries(
            "Requests sent late per path (openloop)",
            "The share of requests sent more than 1 ms behind their due time: the generator, not the path, set the "
            "pace. Above 1% the report warns; every request is also timed from its due time (load.json's "
            "scheduled_ms), so a stall shows in the latency either way.",
            [target(
                or_zero(
                    f"sum by (path) (rate(openloop_late_requests_total{{{GEN}}}[$__rate_interval]))",
                    f"sum by (path) (rate(openloop_requests_total{{{GEN}}}[$__rate_interval]))",
                ) + f" / sum by (path) (rate(openloop_requests_total{{{GEN}}}[$__rate_interval]))",
                "late {{path}}",
            )],
            "percentunit",
        ),
    ]


def load_dashboard():
    """Whether the load generator kept up. Prometheus scrapes openloop as it
    runs; wrk and oha have no such output (their figures go to load.json only),
    so for them the panels show what the rest of the lab sees of them: their
    container's CPU and throttling (cAdvisor) and the requests nginx logged per path."""
    panels = client_panels() + generator_cpu_panels()
    return dashboard(
        "uds-lab-load",
        "uds-lab: load generator",
        f"Whether the load generator kept up: its CPU and throttling ({ANY_GEN}), and openloop's late, dropped "
        "and in-flight requests.",
        panels,
        [TESTID, PATH],
    )


def watchers():
    """Whether node-exporter and cAdvisor run and cAdvisor sees containers: make up
    leaves them out where they cannot run, and their panels are then empty."""
    return stat(
        "Watchers: node-exporter, cAdvisor",
        "1: running and scraped. 0: down, or left out by make up where it cannot run (Docker Desktop, rootless "
        "Docker, / not a shared mount, containerd's socket out of reach: `make doctor` says why); the panels fed by "
        "it stay empty and the report names the figures it lacks. Containers cAdvisor labels: 0 while it runs means "
        "it cannot see the container runtime (google/cadvisor#3772).",
        [
            target('max(up{job="node"}) or vector(0)', "node-exporter"),
            target('max(up{job="cadvisor"}) or vector(0)', "cAdvisor"),
            target('count(container_cpu_usage_seconds_total{container_label_com_docker_compose_service!=""}) or vector(0)',
                   "containers cAdvisor labels"),
        ],
        "short",
        w=24,
        h=4,
        decimals=0,
    )


def host_panels(services):
    """The host's CPU, switches and load, and each compose service's CPU, memory and network (cAdvisor)."""
    return [
        watchers(),
        timeseries(
            "Host CPU by mode",
            "Cores busy on the whole machine, by mode. softirq rises with network traffic across the Docker bridge; "
            "system with connection setup.",
            [target('sum by (mode) (rate(node_cpu_seconds_total{mode!="idle"}[$__rate_interval]))', "{{mode}}")],
            "short",
            stack=True,
        ),
        timeseries(
            "Context switches and interrupts/s (host)",
            "Every request wakes the generator, nginx and the app; every new connection adds more.",
            [
                target("rate(node_context_switches_total[$__rate_interval])", "context switches"),
                target("rate(node_intr_total[$__rate_interval])", "interrupts"),
            ],
            "short",
        ),
        timeseries(
            "CPU per compose service (cAdvisor)",
            "Cores used by each service's container. The lab's own monitoring (Prometheus, cAdvisor, exporters) "
            "shares the machine: it should stay small next to nginx, the app and the generator.",
            [target(f"sum by (container_label_com_docker_compose_service) (rate(container_cpu_usage_seconds_total{{{services}}}[$__rate_interval]))", "{{container_label_com_docker_compose_service}}")],
            "short",
            stack=True,
        ),
        timeseries(
            "Memory per compose service (cAdvisor)",
            "Working set of each service's container.",
            [target(f"sum by (container_label_com_docker_compose_service) (container_memory_working_set_bytes{{{services}}})", "{{container_label_com_docker_compose_service}}")],
            "bytes",
        ),
        timeseries(
            "Network received per compose service (cAdvisor)",
            "Bytes per second into each container's network interface. TCP between nginx and the app crosses the "
            "Docker bridge and shows here; Unix-socket traffic never does.",
            [target(f"sum by (container_label_com_docker_compose_service) (rate(container_network_receive_bytes_total{{{services}}}[$__rate_interval]))", "{{container_label_com_docker_compose_service}}")],
            "Bps",
        ),
        timeseries(
            "Load average (host)",
            "1-minute load average (runnable tasks) against the number of CPUs: above it, work waits for a CPU.",
            [
                target("node_load1", "load1"),
                target('count(node_cpu_seconds_total{mode="idle"})', "CPUs"),
            ],
            "short",
        ),
    ]


def process_panels():
    """The app's Go runtime and nginx's connections, from their own metrics."""
    return [
        timeseries(
            "App Go runtime",
            "Goroutines (one per open connection plus a few) and GC cycles per second in the app.",
            [
                target(f"go_goroutines{{{APP}}}", "goroutines"),
                target(f"rate(go_gc_duration_seconds_count{{{APP}}}[$__rate_interval])", "GC/s"),
            ],
            "short",
        ),
        timeseries(
            "nginx connections (stub_status)",
            "nginx's client connections by state: the generator keeps a few alive; waiting = idle keepalive.",
            [target("nginx_connections_active", "active"), target("nginx_connections_waiting", "waiting")],
            "short",
        ),
    ]


def host_dashboard():
    services = 'container_label_com_docker_compose_service!=""'
    panels = host_panels(services) + process_panels()
    return dashboard(
        "uds-lab-host",
        "uds-lab: host and containers",
        "The machine under the lab: CPU, context switches, and each container's CPU, memory and network.",
        panels,
        [],
    )


DASHBOARDS = {"paths.json": paths_dashboard, "load.json": load_dashboard, "host.json": host_dashboard}


def render(build):
    return json.dumps(build(), indent=2) + "\n"


def main(argv):
    check = "--check" in argv
    stale = []
    for name, build in DASHBOARDS.items():
        path, want = OUT / name, render(build)
        if check:
            if not path.exists() or path.read_text() != want:
                stale.append(str(path))
        else:
            OUT.mkdir(exist_ok=True)
            path.write_text(want)
    if stale:
        print("out of date (run: make dashboards):", *stale, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
