"""The load dashboard (load.json): the client's view of a run and what the
generator costs."""
from panels import ANY_GEN, GEN, LOADGEN, NGX, PATH, SILENT, TESTID, dashboard, or_zero, target, text, timeseries


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
