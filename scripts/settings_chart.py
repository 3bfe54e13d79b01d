"""The chart's copies of settings.toml (scripts/settings.py writes them):
values.yaml's keys, values.schema.json's schemas and templates/_settings.tpl's
environment lists."""
import json
import re

from settings_table import TABLE, TableError


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
