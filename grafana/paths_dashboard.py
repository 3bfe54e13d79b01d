"""The paths dashboard (paths.json): the paths compared, where the time goes
inside nginx, the cost per request, the connections and the sweep."""
from panels import (CORES, GEN, NGX, PATH, PHASES, SWEEP_STEPS, SWEEP_TITLE, TESTID, dashboard, or_zero, row, stat,
                    target, text, timeseries)
from paths_queries import MEASURED, breakdown_targets, by_active_path, quantiles, ratio_to_tcp
from report.lab import APP, CATALOGUE, LOAD
from report.lab import service as svc


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
