"""What the report and the dashboards (grafana/dashboards.py) both say about
the lab: its paths and their colours (catalogue.json), and the PromQL label
selectors of the app's load and of a compose service's container in cAdvisor.
One definition, so a report's figure and a dashboard panel select the same
series and draw a path in the same colour."""
import json
from pathlib import Path

from dotenv import dotenv_values

from report.values import ReportError

ROOT = Path(__file__).resolve().parent.parent
# The settings' defaults (generated from settings.toml, where each is declared
# once); the report's container has none: compose passes the settings it reads.
ENV_FILE = ROOT / ".env"
CATALOGUE = json.loads((ROOT / "catalogue.json").read_text())
# One colour per path, the same in Grafana and in the report's charts.
PATH_COLOURS = {name: p["colour"] for name, p in CATALOGUE["paths"].items()}
# The path every ratio in the tables is to.
BASELINE = CATALOGUE["baseline"]["path"]
# The breakdown's terms (catalogue.json): which the answer uses, which are controls.
TERMS = CATALOGUE["breakdown"]["terms"]


def stood_in_for(term, measured):
    """Whether a term is left out because the one it stands in for (instead_of)
    has its paths in the run (measured: a path -> bool)."""
    other = next((t for t in TERMS if t["key"] == term.get("instead_of")), None)
    return other is not None and all(measured(p) for p in other["paths"])

# The app's series (Prometheus job "app"); nginx's per location, from its
# access log (job "nginx-log"). Every query names the job whose figure it
# reads: a series of the same name from another target is not that figure.
APP = 'job="app"'
NGINX_LOG = 'job="nginx-log"'
# The app's requests that are load, not the lab's own scrapes and healthchecks.
LOAD = 'route!~"/metrics|/healthz|/readyz"'
APP_LOAD = f"{APP},{LOAD}"
# The load generators (catalogue.json's one list of them and what each can
# do), each the compose service of its name.
GENERATORS = tuple(g for g in CATALOGUE["generators"] if g != "about")
# Those whose figures do not reach Prometheus as the run goes (openloop is
# scraped, k6 pushes): their figures are in the run's load.json and report.
SILENT_GENERATORS = tuple(g for g in GENERATORS if not CATALOGUE["generators"][g]["in_prometheus"])


def words(names, last="or"):
    """("k6", "wrk", "oha") -> "k6, wrk or oha"."""
    return ", ".join(names[:-1]) + f" {last} " + names[-1] if len(names) > 1 else "".join(names)


def service(name):
    """cAdvisor series of one compose service's container (label kept by
    --whitelisted_container_labels): the nginx that serves a path (nginx or
    nginx-lo), or the load generator."""
    return f'job="cadvisor",container_label_com_docker_compose_service="{name}"'


def nginx_of(path):
    """The compose service of the nginx that serves a path (catalogue.json)."""
    return (CATALOGUE["paths"].get(path) or {}).get("nginx", "nginx")


def margin_pct(value=None):
    """MARGIN, the answer's margin, as a number (a percentage of TCP's median,
    above 0 and below 100): value (the environment's, where it is set), else
    .env's default; a ReportError naming it otherwise."""
    if value is None:
        value = dotenv_values(ENV_FILE, interpolate=False).get("MARGIN") if ENV_FILE.is_file() else None
        if value is None:
            raise ReportError(f"MARGIN is not set, and .env, which holds its default, is not here ({ENV_FILE})")
    try:
        m = float(value)
    except (TypeError, ValueError):
        m = None
    if m is None or not 0 < m < 100:
        raise ReportError(f'MARGIN="{value}": the answer\'s margin, a percentage of TCP\'s median above 0 and below 100 '
                          "(.env has its default)")
    return m


def listener_of(path):
    """The app listener a path reaches (catalogue.json): tcp or unix."""
    return (CATALOGUE["paths"].get(path) or {}).get("listener", "tcp")


def read_stacks(stacks_dir=ROOT / "stacks"):
    """The apps the lab ships: the lab's own (catalogue.json's "app") and each
    reference stack from its one file, stacks/<name>/stack.env (its STACK_*
    facts; scripts/stack.sh reads the same), as {name: {"lacks", "pools",
    "pools_with", "about", ...}}."""
    stacks = {CATALOGUE["app"]["name"]: CATALOGUE["app"]}
    for f in sorted(stacks_dir.glob("*/stack.env")):
        env = dotenv_values(f, interpolate=False)
        with_ = (env.get("STACK_POOLS_WITH") or "").partition("=")
        stacks[f.parent.name] = {
            "dir": f"stacks/{f.parent.name}", "about": env.get("STACK_ABOUT") or "",
            "protocol": env.get("APP_PROTOCOL") or "http",
            "lacks": [w for w in (env.get("STACK_LACKS") or "").split(",") if w],
            "pools": env.get("STACK_POOLS") == "true",
            "pools_with": {with_[0]: with_[2]} if with_[1] else {},
            "image": env.get("APP_IMAGE"),
        }
    return stacks


STACKS = read_stacks()


def pools(stack, setting=lambda name: None):
    """Whether a stack's pooled (-ka) paths can reuse connections (its
    stack.env: STACK_POOLS, or its STACK_POOLS_WITH setting of the app,
    setting(name) giving the app's value); an app the lab does not ship is
    taken to."""
    entry = STACKS.get(stack) or {}
    return entry.get("pools", True) or any(setting(k) == v for k, v in (entry.get("pools_with") or {}).items())


def stack_of(label, image):
    """The app that ran: the reference stack make up started (STACK, the app
    container's label), the lab's own app (its image at any tag: LAB_IMAGE_TAG,
    or none named), or None for an app the lab does not ship."""
    if label:
        return label
    if not image or image.rpartition(":")[0] == CATALOGUE["app"]["image"].rpartition(":")[0]:
        return CATALOGUE["app"]["name"]
    return None
