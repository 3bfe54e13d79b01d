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
settings_table.py reads and checks the table; settings_chart.py writes the
chart's copies.
"""
import re
import sys

from settings_chart import fill_schema, settings_tpl, values_regions
from settings_table import READERS, ROOT, TABLE, TableError, allowed, load

COMMAND = "make settings"
BEGIN = re.compile(r"^(?P<indent>[ \t]*)(?:#|<!--) >>> settings\.toml: (?P<id>\S+)")
END = re.compile(r"^[ \t]*(?:#|<!--) <<< settings\.toml: (?P<id>\S+)")


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
