"""settings.toml read and checked (scripts/settings.py's table): each
setting's fields, its type and the values it takes; a bad table stops with a
TableError naming the setting. Standard library only (Python 3.11's tomllib)."""
import re
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python before 3.11
    sys.exit("settings: needs Python 3.11 or later (tomllib reads settings.toml)")

ROOT = Path(__file__).resolve().parent.parent
TABLE = "settings.toml"

TYPES = ("int", "number", "percent", "enum", "list", "string", "image", "cpus", "cpuset", "memory")
# The commands a setting's `readers` may name, in the order the docs list them.
READERS = ("all", "up", "load", "max", "sweep", "floor", "report", "contract", "compare",
           "k8s-up", "k8s-load", "k8s-report", "test", "e2e")
FIELDS = {"group", "type", "default", "env", "min", "max", "exclusive_min", "words", "optional", "choices",
          "pattern", "allowed", "readers", "compose", "host", "chart", "chart_env", "compose_only", "row",
          "empty", "doc"}
NAME = re.compile(r"[A-Z][A-Z0-9_]*")
CHART_KEY = re.compile(r"[a-z][A-Za-z0-9]*(\.[a-z][A-Za-z0-9-]*)+")
WHOLE = re.compile(r"[0-9]+")
NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?")
PATTERNS = {
    "image": re.compile(r"[^\s:@]+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?"),
    "cpus": re.compile(r"[0-9]+(\.[0-9]+)?"),
    "cpuset": re.compile(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*"),
    "memory": re.compile(r"[0-9]+[bkmg]"),
    "percent": re.compile(r"[0-9]+(\.[0-9]+)?%?"),
}


class TableError(Exception):
    pass


def load(path=ROOT / TABLE):
    """The table, checked: {"groups": {id: {...}}, "settings": {NAME: {...}}, "chart_env": [...]}."""
    try:
        doc = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise TableError(f"{TABLE}: {e}") from None
    groups, settings = doc.get("group", {}), doc.get("setting", {})
    chart_env = doc.get("chart", {}).get("env", [])
    for key in doc:
        if key not in ("group", "setting", "chart"):
            raise TableError(f"{TABLE}: unknown table [{key}] (known: group, setting, chart)")
    for gid, g in groups.items():
        if not isinstance(g.get("title"), str):
            raise TableError(f"{TABLE}: group {gid} has no title")
    seen = {}
    for name, s in settings.items():
        check(name, s, groups, seen)
        seen[name] = s
    for region in chart_env:
        if not any(region in s.get("compose", ()) for s in settings.values()):
            raise TableError(f"{TABLE}: [chart] env names {region}, which no setting's compose list names")
    return {"groups": groups, "settings": settings, "chart_env": chart_env}


def check(name, s, groups, seen):
    """One setting's declaration, or a TableError naming it."""
    def bad(why):
        raise TableError(f"{TABLE}: {name}: {why}")
    if not NAME.fullmatch(name):
        bad("a setting's name is upper-case letters, digits and _")
    if unknown := set(s) - FIELDS:
        bad(f"unknown field {', '.join(sorted(unknown))} (known: {', '.join(sorted(FIELDS))})")
    if s.get("group") not in groups:
        bad(f'group "{s.get("group")}" is not one of [group.*] ({", ".join(groups)})')
    if s.get("type") not in TYPES:
        bad(f'type "{s.get("type")}" is not one of {", ".join(TYPES)}')
    if s.get("env", True) is not False and not isinstance(s.get("default"), str):
        bad("default missing: its value as .env writes it, a string (\"\" for empty), or env = false")
    if s.get("env", True) is False and "default" in s:
        bad("env = false (not in .env) and a default: one or the other")
    readers = s.get("readers")
    if not readers or not isinstance(readers, list) or set(readers) - set(READERS):
        bad(f"readers must list the commands that read it, of {', '.join(READERS)}")
    if s["type"] == "enum" and not s.get("choices"):
        bad("type enum needs choices")
    if "choices" in s and s["type"] not in ("enum", "list"):
        bad("choices are for type enum or list")
    for f in ("min", "max", "exclusive_min"):
        if f in s and s["type"] not in ("int", "number"):
            bad(f"{f} is for type int or number")
    if "pattern" in s:
        try:
            re.compile(s["pattern"])
        except re.error as e:
            bad(f"pattern {s['pattern']!r}: {e}")
    if "row" in s:
        first = seen.get(s["row"])
        if not first or "row" in first or first["group"] != s["group"]:
            bad(f"row = {s['row']!r}: must name an earlier setting of group {s['group']} that has its own row")
    elif not s.get("doc"):
        bad("doc missing (one line of what it does; or row = another setting's name, to share its row)")
    if "chart" in s and not CHART_KEY.fullmatch(s["chart"]):
        bad(f"chart = {s['chart']!r}: a values key, dotted (e.g. load.rate)")
    if s.get("compose_only") and "chart" in s:
        bad("compose_only and a chart key: one or the other")
    if "compose" in s and not all(isinstance(c, str) and c for c in s["compose"]):
        bad("compose lists the names of compose.yaml's environment regions")
    if "default" in s:
        why = invalid(s, s["default"])
        if why:
            bad(f'default "{s["default"]}" {why}')


def invalid(s, value):
    """Why value is not one the setting takes (None: it is)."""
    t = s["type"]
    if value == "":
        return None if s.get("optional") or (t == "enum" and "" in s["choices"]) else \
            "is empty, which it does not take (optional = true allows it)"
    if value in s.get("words", ()):
        return None
    if t == "enum" and value not in s["choices"]:
        return f"is not one of {', '.join(repr(c) for c in s['choices'])}"
    if t == "int" or t == "number":
        if not (WHOLE if t == "int" else NUMBER).fullmatch(value):
            return f"is not a {'whole number' if t == 'int' else 'number'}"
        n = float(value)
        if "min" in s and n < s["min"] or "max" in s and n > s["max"] or \
                "exclusive_min" in s and n <= s["exclusive_min"]:
            return f"is outside {allowed_range(s)}"
    if t in PATTERNS and not PATTERNS[t].fullmatch(value):
        return f"is not {allowed(s)}"
    if t == "percent" and not 0 < float(value.rstrip("%")) < 100:
        return "is not above 0 and below 100"
    items = [x.strip() for x in value.split(",")] if t == "list" else [value]
    if "choices" in s and t == "list" and not set(items) <= set(s["choices"]):
        return f"names one that is not one of {', '.join(s['choices'])}"
    if "pattern" in s and not all(re.search(s["pattern"], x) for x in items):
        return f"does not match {s['pattern']}"
    return None


def allowed_range(s):
    lo, hi = s.get("min"), s.get("max")
    if "exclusive_min" in s:
        text = f"above {s['exclusive_min']}" + (f", at most {hi}" if hi is not None else "")
    elif lo is not None and hi is not None:
        text = f"{lo} to {hi}"
    elif lo is not None:
        text = f">= {lo}"
    else:
        text = f"<= {hi}" if hi is not None else "any"
    return text


def allowed(s):
    """The values a setting takes, in words (markdown)."""
    t = s["type"]
    if "allowed" in s:
        text = s["allowed"]
    elif t == "int":
        text = f"a whole number {allowed_range(s)}"
    elif t == "number":
        text = f"a number {allowed_range(s)}"
    elif t == "percent":
        text = "a percentage above 0 and below 100 (`5` or `5%`)"
    elif t == "enum":
        text = ", ".join(f"`{c}`" if c else "empty" for c in s["choices"])
    elif t == "list":
        text = "a comma list" + (f" of {', '.join(f'`{c}`' for c in s['choices'])}" if "choices" in s else "")
    elif t == "image":
        text = "an image, `name:tag`"
    elif t == "cpus":
        text = "CPUs, a number above 0 (e.g. `1.5`)"
    elif t == "cpuset":
        text = "cores, e.g. `0` or `1-3`"
    elif t == "memory":
        text = "bytes with a unit `b`, `k`, `m` or `g` (e.g. `256m`)"
    else:
        text = f"text matching `{s['pattern']}`" if "pattern" in s else "text"
    if s.get("words"):
        text += ", or " + ", ".join(f"`{w}`" for w in s["words"])
    if s.get("optional") and t != "enum" and not text.startswith("empty"):
        text = "empty, or " + text
    return text
