#!/usr/bin/env python3
"""Every setting of the lab is declared once, in settings.toml; this writes
each place that needs a copy of it:

- .env, whole: every setting's default, as compose, make and the scripts read it;
- docs/configuration.md: the tables of settings (the region between its
  `settings.toml` marker comments);
- compose.yaml: the environment lists named in a setting's `compose` (each
  the region of that name);
- Makefile: HOST_SETTINGS, the settings make passes to loadgen/lab_run.py
  on the host (those with `host`);
- k8s/uds-lab/values.yaml: a setting's `chart` key (the region named by the
  key's parent, e.g. `load` or `app.resources.limits`), and
  values.schema.json: that key's schema (keys under a $ref'd definition, the
  resources, take the definition's);
- k8s/uds-lab/templates/_settings.tpl, whole: "uds-lab.settingsEnv.<list>",
  the environment the chart gives for each compose list of `[chart] env`.

    make settings                          # write them
    python3 scripts/settings.py --check    # exit 1 naming each file regenerating would change

A region is the lines between `>>> settings.toml: ID` and `<<< settings.toml:
ID` in a comment (`#`, or `<!-- -->` in markdown), indented as its first
marker; the rest of each file is written by hand. Standard library only
(Python 3.11's tomllib). A bad table stops it with an error naming the setting.
"""
import json
import re
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python before 3.11
    sys.exit("settings: needs Python 3.11 or later (tomllib reads settings.toml)")

ROOT = Path(__file__).resolve().parent.parent
TABLE = "settings.toml"
COMMAND = "make settings"

TYPES = ("int", "number", "percent", "enum", "list", "string", "image", "cpus", "cpuset", "memory")
# The commands a setting's `readers` may name, in the order the docs list them.
READERS = ("all", "up", "load", "max", "sweep", "floor", "report", "contract", "compare",
           "k8s-up", "k8s-load", "k8s-report", "test", "e2e")
FIELDS = {"group", "type", "default", "env", "min", "max", "exclusive_min", "words", "optional", "choices",
          "pattern", "allowed", "readers", "compose", "host", "chart", "chart_env", "compose_only", "row",
          "empty", "doc"}
NAME = re.compile(r"[A-Z][A-Z0-9_]*")
CHART_KEY = re.compile(r"[a-z][A-Za-z0-9]*(\.[a-z][A-Za-z0-9-]*)+")
BEGIN = re.compile(r"^(?P<indent>[ \t]*)(?:#|<!--) >>> settings\.toml: (?P<id>\S+)")
END = re.compile(r"^[ \t]*(?:#|<!--) <<< settings\.toml: (?P<id>\S+)")
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


# --- .env ---------------------------------------------------------------------------

def dotenv_value(name, v):
    """v as a line of .env that compose and scripts/dotenv.sh read the same."""
    if "\\" in v or "\n" in v:
        raise TableError(f"{TABLE}: {name}: default has \\ or a line break, which .env cannot hold")
    if not re.search(r"[\s#'\"$]", v):
        return v
    if "$" not in v and '"' not in v:
        return f'"{v}"'
    if "'" in v:
        raise TableError(f"{TABLE}: {name}: default has ' and $ or \", which .env cannot quote")
    return f"'{v}'"


def write_env(t):
    out = [
        "# uds-lab's settings, each with its default. Compose, make and the scripts",
        "# read this file; a variable set in your shell (or on the make command line)",
        "# wins over it. What each one does, and the values it takes:",
        "# docs/configuration.md. Generated from settings.toml (make settings writes",
        "# it): change a default there, not here.",
    ]
    for gid, g in t["groups"].items():
        names = [n for n, s in t["settings"].items() if s["group"] == gid and s.get("env", True)]
        if names:
            out += ["", f"# --- {g['title']} ---"]
            out += [f"{n}={dotenv_value(n, t['settings'][n]['default'])}" for n in names]
    return "\n".join(out) + "\n"


# --- docs/configuration.md -----------------------------------------------------------

def readers(names, t):
    got = {r for n in names for r in t["settings"][n]["readers"]}
    if "all" in got:
        return "every command"
    return ", ".join(f"make {r}" for r in READERS if r in got)


def cell(text):
    return text.replace("|", "\\|").replace("\n", " ")


def default_text(s):
    if s.get("env", True) is False:
        return "unset"
    if s["default"] == "":
        return f"empty: {s['empty']}" if "empty" in s else "empty"
    return f"`{s['default']}`"


def defaults(ss):
    texts = [default_text(s) for s in ss]
    return texts[0] + (" each" if len(ss) > 1 else "") if len(set(texts)) == 1 else ", ".join(texts)


def docs_tables(t):
    rows = {}  # first setting of a row -> its settings
    for n, s in t["settings"].items():
        rows.setdefault(s.get("row", n), []).append(n)
    out = []
    for gid, g in t["groups"].items():
        firsts = [n for n in rows if t["settings"][n]["group"] == gid]
        if not firsts:
            continue
        out += ["", f"### {g['title']}", ""]
        if g.get("doc"):
            out += [g["doc"], ""]
        out += ["| setting | default | takes | read by | what it does |", "| --- | --- | --- | --- | --- |"]
        for first in firsts:
            names = rows[first]
            ss = [t["settings"][n] for n in names]
            takes = [allowed(s) for s in ss]
            if len(set(takes)) == 1:
                takes = takes[:1]
            else:
                takes = [f"`{n}`: {a}" for n, a in zip(names, takes)]
            by = readers(names, t)
            charts = [f"`{s['chart']}`" for s in ss if "chart" in s]
            if charts:
                by += f"; the chart's {', '.join(charts)}"
            if any(s.get("compose_only") for s in ss):
                by += "; Compose only"
            doc = ss[0]["doc"]
            out.append("| " + " | ".join(cell(c) for c in (
                ", ".join(f"`{n}`" for n in names), defaults(ss),
                "; ".join(takes), by, doc)) + " |")
    return out + [""]


# --- compose.yaml, the Makefile -------------------------------------------------------

def compose_regions(t):
    regions = {}
    for n, s in t["settings"].items():
        for r in s.get("compose", ()):
            regions.setdefault(r, []).append(f"{n}: ${{{n}}}")
    return regions


def makefile_regions(t):
    names = [n for n, s in t["settings"].items() if s.get("host")]
    return {"host": [f"HOST_SETTINGS := {' '.join(names)}"]}


# --- the chart --------------------------------------------------------------------------

def chart_value(s):
    """The default as values.yaml holds it: compose's 256m is Kubernetes' 256Mi."""
    v, t = s["default"], s["type"]
    if t == "memory":
        return v[:-1] + {"b": "", "k": "Ki", "m": "Mi", "g": "Gi"}[v[-1]]
    if t == "int" and v != "":
        return int(v)
    return v


def yaml_scalar(v):
    if isinstance(v, int):
        return str(v)
    plain = re.fullmatch(r"[A-Za-z0-9/][A-Za-z0-9_./:@-]*", v) and re.search("[A-Za-z]", v) and \
        not re.fullmatch(r"[0-9.]+[eE][-+]?[0-9]+|0[xXoO].*", v) and \
        v.lower() not in ("true", "false", "yes", "no", "on", "off", "null", "y", "n")
    return v if plain else json.dumps(v)


def values_regions(t):
    regions = {}
    for n, s in t["settings"].items():
        if "chart" in s:
            parent, leaf = s["chart"].rsplit(".", 1)
            regions.setdefault(parent, []).append(f"{leaf}: {yaml_scalar(chart_value(s))}  # {n}")
    return regions


def schema_of(s):
    t = s["type"]
    if t == "image":
        return {"$ref": "#/definitions/image"}
    if t == "enum":
        return {"enum": s["choices"]}
    if t == "int":
        node = {"type": ["string", "integer"], "pattern": "^[0-9]*$"} if s.get("optional") else {"type": "integer"}
        for f, k in (("min", "minimum"), ("max", "maximum")):
            if f in s:
                node[k] = s[f]
        return node
    if t == "percent":  # "5", "5%" or 5; empty where optional (plan.py checks it is above 0 and below 100)
        return {"type": ["string", "number"], "pattern": "^([0-9]+([.][0-9]+)?%?)?$" if s.get("optional")
                else "^[0-9]+([.][0-9]+)?%?$", "exclusiveMinimum": 0, "exclusiveMaximum": 100}
    if t in ("string", "list"):
        node = {"type": "string"}
        if "pattern" in s and t == "string":
            node["pattern"] = s["pattern"]
        elif not s.get("optional"):
            node["minLength"] = 1
        return node
    raise TableError(f"{TABLE}: chart key {s['chart']}: the chart has no schema for type {t} "
                     "outside a $ref'd definition")


def fill_schema(text, t, path):
    schema = json.loads(text)
    for n, s in t["settings"].items():
        if "chart" not in s:
            continue
        node = schema
        parts = s["chart"].split(".")
        for i, part in enumerate(parts[:-1]):
            props = node.get("properties")
            if props is None or part not in props:
                raise TableError(f"{path}: no properties.{'.properties.'.join(parts[:i + 1])} for {n}'s chart key {s['chart']}")
            node = props[part]
            if "$ref" in node:
                break  # a shared definition (the resources) says what it takes
        else:
            if "properties" not in node:
                raise TableError(f"{path}: {'.'.join(parts[:-1])} has no properties for {n}'s chart key {s['chart']}")
            node["properties"][parts[-1]] = schema_of(s)
    return dump_json(schema) + "\n"


def dump_json(v, indent=0, width=140):
    """JSON with a small object or list on one line, as values.schema.json was written."""
    one = json.dumps(v, ensure_ascii=False)
    if not isinstance(v, (dict, list)) or not v or indent + len(one) <= width and indent >= 4:
        return one
    pad = " " * (indent + 2)
    if isinstance(v, list):
        items = [pad + dump_json(x, indent + 2, width) for x in v]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    items = [f"{pad}{json.dumps(k)}: {dump_json(x, indent + 2, width)}" for k, x in v.items()]
    return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"


def settings_tpl(t):
    out = [
        "{{/*",
        "Generated from settings.toml by scripts/settings.py (make settings): do not",
        "edit. Each helper is the environment compose gives one of its environment",
        "lists (compose.yaml's region of that name), for the settings the chart",
        "carries, from their values keys; its argument is the chart's root context.",
        "*/}}",
    ]
    for region in t["chart_env"]:
        out.append(f'{{{{- define "uds-lab.settingsEnv.{region}" -}}}}')
        for n, s in t["settings"].items():
            if region in s.get("compose", ()) and "chart" in s and s.get("chart_env", True):
                out += [f"- name: {n}", f'  value: {{{{ include "uds-lab.str" .Values.{s["chart"]} | quote }}}}']
        out.append("{{- end }}")
    return "\n".join(out) + "\n"


# --- regions ----------------------------------------------------------------------------

def fill(text, path, regions, what):
    """text with each region's lines replaced by regions[id]; every id written once."""
    out, lines, i, done = [], text.split("\n"), 0, set()
    while i < len(lines):
        out.append(lines[i])
        m = BEGIN.match(lines[i])
        i += 1
        if not m:
            continue
        rid, indent = m["id"], m["indent"]
        if rid not in regions:
            raise TableError(f"{path}: region {rid} is not one {TABLE} writes ({what}: {', '.join(regions) or 'none'})")
        if rid in done:
            raise TableError(f"{path}: region {rid} twice")
        while i < len(lines) and not END.match(lines[i]):
            if BEGIN.match(lines[i]):
                raise TableError(f"{path}: region {rid} has no end marker (<<< settings.toml: {rid})")
            i += 1
        if i == len(lines) or END.match(lines[i])["id"] != rid:
            raise TableError(f"{path}: region {rid} has no end marker (<<< settings.toml: {rid})")
        out += [indent + line if line else line for line in regions[rid]]
        done.add(rid)
    if missing := [r for r in regions if r not in done]:
        raise TableError(f"{path}: no region for {', '.join(missing)} ({what}): add its marker comments "
                         f"(>>> settings.toml: {missing[0]} ... <<< settings.toml: {missing[0]})")
    return "\n".join(out)


def outputs(t):
    """{path relative to the root: what it must hold}."""
    def read(rel):
        return (ROOT / rel).read_text()
    tables = {"table": docs_tables(t)}
    return {
        ".env": write_env(t),
        "docs/configuration.md": fill(read("docs/configuration.md"), "docs/configuration.md", tables, "the tables"),
        "compose.yaml": fill(read("compose.yaml"), "compose.yaml", compose_regions(t), "settings' compose lists"),
        "Makefile": fill(read("Makefile"), "Makefile", makefile_regions(t), "the settings lab_run.py reads on the host"),
        "k8s/uds-lab/values.yaml": fill(read("k8s/uds-lab/values.yaml"), "k8s/uds-lab/values.yaml",
                                        values_regions(t), "the parents of settings' chart keys"),
        "k8s/uds-lab/values.schema.json": fill_schema(read("k8s/uds-lab/values.schema.json"), t,
                                                      "k8s/uds-lab/values.schema.json"),
        "k8s/uds-lab/templates/_settings.tpl": settings_tpl(t),
    }


def main(argv=sys.argv[1:]):
    check_only = argv == ["--check"]
    if argv and not check_only:
        print("usage: scripts/settings.py [--check]", file=sys.stderr)
        return 2
    try:
        want = outputs(load())
    except (TableError, OSError) as e:
        print(f"settings: {e}", file=sys.stderr)
        return 2
    stale = []
    for rel, text in want.items():
        p = ROOT / rel
        if p.exists() and p.read_text() == text:
            continue
        stale.append(rel)
        if not check_only:
            p.write_text(text)
            print(f"settings: wrote {rel}")
    if not stale and not check_only:
        print(f"settings: every file is what {TABLE} gives")
    if check_only and stale:
        for rel in stale:
            print(f"settings: {rel} is not what {TABLE} gives: run `{COMMAND}`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
