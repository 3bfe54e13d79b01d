"""What the README and docs/ quote of the lab's own output is what the code
prints: the plan's length and progress lines, a bad setting's one line, and
the report's answer sentence."""
import re

import pytest

import plan as runplan

CATALOGUE = runplan.read_catalogue({})
DOCS = [runplan.ROOT / "README.md", *sorted((runplan.ROOT / "docs").glob("*.md"))]


def quotes(pattern):
    """(file name, quoted text) of every `...` in the docs that matches pattern."""
    out = []
    for f in DOCS:
        for q in re.findall(r"`([^`\n]+)`|^(\d+ phases, .+|phase \d+/\d+ .+)$", f.read_text(), re.M):
            text = q[0] or q[1]
            if re.match(pattern, text):
                out.append((f.name, text))
    return out


def default_plan(seed):
    s = runplan.read_settings({"SEED": seed}, CATALOGUE)
    return s, runplan.plan(s, runplan.routes(CATALOGUE["workloads"], s))


def test_the_plan_lines_quoted_are_the_default_plans():
    lines = quotes(r"\d+ phases, about ")
    assert any(f == "README.md" for f, _ in lines), "the README quotes the plan's length"
    for f, text in lines:
        seed = re.search(r"SEED=(\d+)", text)
        assert seed, f"{f}: {text!r} names no SEED"
        s, phases = default_plan(seed.group(1))
        assert text == runplan.describe(s, phases), f"{f}: {text!r}"
    for f, text in quotes(r"phase \d+/\d+ "):
        s, phases = default_plan("42")
        assert text in [runplan.progress(phases, i) for i in range(len(phases))], f"{f}: {text!r}"


def test_the_setting_errors_quoted_are_what_plan_py_says():
    lines = quotes(r"make: [A-Z_]+=")
    assert lines, "the docs quote a bad setting's line"
    for f, text in lines:
        name, value = re.match(r'make: ([A-Z_]+)="([^"]*)"', text).groups()
        with pytest.raises(runplan.SettingError) as e:
            runplan.read_settings({name: value}, CATALOGUE)
        assert text == f"make: {e.value}", f"{f}: {text!r}"


def test_the_error_bodies_quoted_are_in_the_code_that_sends_them():
    """nginx's own JSON errors (its template's $lab_error map) and the app's:
    each quoted body's text up to its "..." is written in one of them."""
    sources = [runplan.ROOT / "nginx" / "templates" / "nginx.conf.template",
               *sorted((runplan.ROOT / "services" / "app").glob("*.go"))]
    code = "\n".join(p.read_text() for p in sources if not p.name.endswith("_test.go"))
    # The template as compose renders it, with .env's values.
    env = dict(re.findall(r"^([A-Z_]+)=(\S*)$", (runplan.ROOT / ".env").read_text(), re.M))
    code = re.sub(r"\$\{([A-Z_]+)\}", lambda m: env.get(m.group(1), m.group(0)), code)
    bodies = quotes(r'\{"error":"[^"$]')
    assert bodies, "the docs quote an error body"
    for f, text in bodies:
        message = re.match(r'\{"error":"([^"]*)', text).group(1).split("...")[0].rstrip(": ")
        message = re.sub(r" (GET|POST) /\S*$", "", message)  # the app names the request's method and path
        assert re.search(re.escape(message) + r"(?![A-Za-z])", code), f"{f}: {text!r} is not in nginx's template or the app"


def test_the_lab_not_up_line_quoted_is_the_makefiles():
    makefile = (runplan.ROOT / "Makefile").read_text()
    for f, text in quotes(r"make: the lab is not up"):
        head, tail = text.split("...")
        assert head in makefile and tail in makefile, f"{f}: {text!r}"
