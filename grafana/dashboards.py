#!/usr/bin/env python3
"""Writes grafana/dashboards/*.json: classic Grafana dashboard JSON, one panel
helper instead of hand-copied panel blocks.

    python3 grafana/dashboards.py          # write the files
    python3 grafana/dashboards.py --check  # fail if the files are not up to date
"""
import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "dashboards"
# The uid provisioned in grafana/provisioning/datasources/prometheus.yaml.
DS = {"type": "prometheus", "uid": "uds-lab-prometheus"}
# Requests the lab itself makes (scrapes, healthchecks) are not load.
NOT_LOAD = 'route!~"/metrics|/healthz|/readyz"'
K6 = 'testid=~"$testid", path=~"$path"'
# One colour per path, the same on every panel.
PATH_COLOURS = {"tcp": "orange", "uds": "green", "tcp-ka": "red", "uds-ka": "blue"}
LISTENER_COLOURS = {"tcp": "orange", "unix": "green"}


def overrides(colours):
    """Fixes each series' colour by its legend name."""
    return [
        {
            "matcher": {"id": "byName", "options": name},
            "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": colour}}],
        }
        for name, colour in colours.items()
    ]


def timeseries(title, description, exprs, unit, legend, colours=None, grid=(12, 8)):
    """A time series panel; exprs is a list of PromQL strings, legend the legend format."""
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"w": grid[0], "h": grid[1]},
        "fieldConfig": {
            "defaults": {"unit": unit, "custom": {"lineWidth": 2, "fillOpacity": 5}},
            "overrides": overrides(colours or {}),
        },
        "options": {
            "legend": {"displayMode": "table", "placement": "bottom", "calcs": ["mean", "max", "lastNotNull"]},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DS, "expr": e, "legendFormat": legend}
            for i, e in enumerate(exprs)
        ],
    }


def text(title, content, grid=(24, 4)):
    return {
        "type": "text",
        "title": title,
        "gridPos": {"w": grid[0], "h": grid[1]},
        "options": {"mode": "markdown", "content": content},
    }


def query_var(name, label, query, multi=True):
    return {
        "type": "query",
        "name": name,
        "label": label,
        "datasource": DS,
        "query": {"query": query, "refId": name},
        "definition": query,
        "refresh": 2,
        "multi": multi,
        "includeAll": True,
        "allValue": ".*",
        "current": {"text": "All", "value": "$__all"},
        "sort": 1,
    }


def layout(panels):
    """Places panels left to right, wrapping at 24 columns, and numbers them."""
    x = y = row_h = 0
    for i, p in enumerate(panels, start=1):
        w, h = p["gridPos"]["w"], p["gridPos"]["h"]
        if x + w > 24:
            x, y, row_h = 0, y + row_h, 0
        p["gridPos"].update({"x": x, "y": y})
        p["id"] = i
        x, row_h = x + w, max(row_h, h)
    return panels


def dashboard(uid, title, description, panels, variables):
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
        "templating": {"list": variables},
        "annotations": {"list": []},
        "panels": layout(panels),
    }


def paths_dashboard():
    panels = [
        text(
            "How to read this dashboard",
            "nginx reaches the **same app** four ways: `tcp` and `uds` open a **new upstream connection per "
            "request** (TCP across the Docker bridge vs a Unix socket in a shared volume); `tcp-ka` and "
            "`uds-ka` **reuse pooled keepalive connections**. `make load` drives each path in turn at a fixed "
            "rate, so compare latency and connection churn at equal load. The socket saves TCP connection setup "
            "and the bridge's network stack: its gain is largest on the new-connection paths and shrinks once "
            "keepalive removes connection setup.",
        ),
        timeseries(
            "Requests/s per path (k6)",
            "Requests k6 completed per second, by nginx path. At a fixed rate every path should sit at RATE; "
            "a path below it could not keep up (or k6 could not).",
            [f"sum by (path) (rate(k6_http_reqs_total{{{K6}}}[$__rate_interval]))"],
            "reqps",
            "{{path}}",
            PATH_COLOURS,
        ),
        timeseries(
            "Latency p99 per path, as the client sees it (k6)",
            "99th percentile of k6's request duration (nginx plus the app plus the hop between them), "
            "per time window from k6's native histograms.",
            [
                f"histogram_quantile(0.99, sum by (path) (rate(k6_http_req_duration_seconds{{{K6}}}[$__rate_interval])))"
            ],
            "s",
            "{{path}}",
            PATH_COLOURS,
        ),
        timeseries(
            "App requests/s per listener",
            "Requests the app served, by the listener they arrived on: `tcp` is its TCP port, `unix` its socket. "
            "/tcp* paths must land on tcp and /uds* paths on unix.",
            [f"sum by (listener) (rate(app_http_requests_total{{{NOT_LOAD}}}[$__rate_interval]))"],
            "reqps",
            "{{listener}}",
            LISTENER_COLOURS,
        ),
        timeseries(
            "App latency p99 per listener",
            "99th percentile of the time the app spent on a request, from its own histogram. The app's time "
            "barely depends on the listener: a difference the client sees but the app does not is in the "
            "connection and the hop.",
            [
                f"histogram_quantile(0.99, sum by (listener, le) (rate(app_http_request_duration_seconds_bucket{{{NOT_LOAD}}}[$__rate_interval])))"
            ],
            "s",
            "{{listener}}",
            LISTENER_COLOURS,
        ),
        timeseries(
            "New upstream connections/s per listener",
            "Connections the app accepted per second. On /tcp/ and /uds/ this equals the request rate (one "
            "connection per request); on the keepalive paths it drops to nearly zero. This churn is what "
            "keepalive and, to a lesser degree, the socket save.",
            ["sum by (listener) (rate(app_connections_accepted_total[$__rate_interval]))"],
            "cps",
            "{{listener}}",
            LISTENER_COLOURS,
        ),
        timeseries(
            "Open connections",
            "Connections open at the app per listener, and nginx's client connections (stub_status).",
            ["sum by (listener) (app_connections_open)", "sum(nginx_connections_active)"],
            "short",
            "{{listener}}",
            LISTENER_COLOURS,
        ),
        timeseries(
            "Failed requests/s per path (k6)",
            "Requests k6 counted as failed (non-2xx/3xx or transport error). Anything above zero means a "
            "path's figures are not comparable.",
            [f'sum by (path) (rate(k6_http_reqs_total{{{K6}, expected_response="false"}}[$__rate_interval]))'],
            "reqps",
            "{{path}}",
            PATH_COLOURS,
            grid=(24, 6),
        ),
    ]
    variables = [
        query_var("testid", "Test run", "label_values(k6_http_reqs_total, testid)"),
        query_var("path", "Path", "label_values(k6_http_reqs_total, path)"),
    ]
    return dashboard(
        "uds-lab-paths",
        "uds-lab: paths compared",
        "TCP vs Unix socket between nginx and the app, with and without upstream keepalive.",
        panels,
        variables,
    )


DASHBOARDS = {"paths.json": paths_dashboard}


def render(build):
    return json.dumps(build(), indent=2, sort_keys=False) + "\n"


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
        print("out of date (run: python3 grafana/dashboards.py):", *stale, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
