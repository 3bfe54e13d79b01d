"""The host dashboard (host.json): the machine under the lab and each
container's CPU, memory and network."""
from panels import dashboard, stat, target, timeseries
from report.lab import APP


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
