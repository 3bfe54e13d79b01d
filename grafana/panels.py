"""The dashboards' building blocks (grafana/dashboards.py writes the
dashboards): the datasource, the selectors of the lab's jobs, the colours,
the panel, variable and annotation helpers, the layout, and or_zero."""
import re

from report.lab import GENERATORS, PATH_COLOURS, SILENT_GENERATORS, words


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
