"""What the report and the dashboards (grafana/dashboards.py) both say about
the lab: its paths and their colours (catalogue.json), and the PromQL label
selectors of the app's load and of a compose service's container in cAdvisor.
One definition, so a report's figure and a dashboard panel select the same
series and draw a path in the same colour."""
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CATALOGUE = json.loads((ROOT / "catalogue.json").read_text())
# One colour per path, the same in Grafana and in the report's charts.
PATH_COLOURS = {name: p["colour"] for name, p in CATALOGUE["paths"].items()}
# The path every ratio in the tables is to.
BASELINE = CATALOGUE["baseline"]["path"]
# The breakdown's terms (catalogue.json): which the answer uses, which are controls.
TERMS = CATALOGUE["breakdown"]["terms"]

# The app's series (Prometheus job "app").
APP = 'job="app"'
# The app's requests that are load, not the lab's own scrapes and healthchecks.
LOAD = 'route!~"/metrics|/healthz|/readyz"'
APP_LOAD = f"{APP},{LOAD}"
# The load generators (catalogue.json's one list of them and what each can
# do), each the compose service of its name.
GENERATORS = tuple(g for g in CATALOGUE["generators"] if g != "about")
# Those that send nothing to Prometheus (only k6 writes there): their figures
# are in the run's load.json and report.
SILENT_GENERATORS = tuple(g for g in GENERATORS if not CATALOGUE["generators"][g]["pushes"])


def words(names, last="or"):
    """("k6", "wrk", "oha") -> "k6, wrk or oha"."""
    return ", ".join(names[:-1]) + f" {last} " + names[-1] if len(names) > 1 else "".join(names)


def service(name):
    """cAdvisor series of one compose service's container (label kept by
    --whitelisted_container_labels): the nginx that serves a path (nginx or
    nginx-lo), or the load generator."""
    return f'container_label_com_docker_compose_service="{name}"'


def nginx_of(path):
    """The compose service of the nginx that serves a path (catalogue.json)."""
    return (CATALOGUE["paths"].get(path) or {}).get("nginx", "nginx")


def listener_of(path):
    """The app listener a path reaches (catalogue.json): tcp or unix."""
    return (CATALOGUE["paths"].get(path) or {}).get("listener", "tcp")


def pools(stack, setting=lambda name: None):
    """Whether a stack's pooled (-ka) paths can reuse connections
    (catalogue.json's stacks: pools, or one of its pools_with settings of the
    app, setting(name) giving the app's value); a stack the catalogue does not
    know is taken to."""
    entry = CATALOGUE["stacks"].get(stack) or {}
    return entry.get("pools", True) or any(setting(k) == v for k, v in (entry.get("pools_with") or {}).items())


def stack_of(image, stacks_dir=ROOT / "stacks"):
    """The reference stack (catalogue.json's stacks) whose image this is, by the
    APP_IMAGE its stacks/<name>/lab.env sets; "go" for the lab's own app
    (no APP_IMAGE); None for an app the lab does not ship."""
    if not image or image == "uds-lab/app:local":
        return "go"
    for name in CATALOGUE["stacks"]:
        env = stacks_dir / name / "lab.env"
        if env.is_file() and f"APP_IMAGE={image}" in env.read_text().split():
            return name
    return None
