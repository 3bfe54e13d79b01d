"""The report's selection on a shared Prometheus: label matchers added to
every series selector of every query the report sends, so that it reads one
lab's series and no other's of the same name.

`make k8s-report K8S_PROMETHEUS=...` (scripts/k8s.sh) reads a cluster's
Prometheus, which scrapes the lab through the chart's PodMonitors and may
scrape other workloads, or other releases of the lab, with jobs named `app`
or `nginx` too: it passes `--select 'namespace="<ns>",uds_lab_release="<release>"'`
(the operator labels every target with its namespace; the PodMonitors label
the lab's targets with their release). The lab's own Prometheus (compose's,
the chart's) scrapes one lab and needs none."""
import re

from report.values import ReportError

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# A number, a duration (5m, 1h30m) or a timestamp: digits, then letters and digits.
_NUMBER = re.compile(r"(0x[0-9a-fA-F]+|[0-9]*\.?[0-9]+([eE][+-]?[0-9]+)?[a-zA-Z0-9]*)")
_MATCHER = r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*")\s*'
_MATCHERS = re.compile(rf"{_MATCHER}(,{_MATCHER})*")
# Words of PromQL that are not a series' name. After the grouping ones comes
# a list of label names in parentheses (group_left and group_right may have none).
_GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
# The aggregations' names too: `sum by (le) (...)` puts a word between the
# name and its parenthesis.
_KEYWORDS = _GROUPING | {"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan", "sum", "min", "max", "avg",
                         "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile",
                         "limitk", "limit_ratio"}


def matchers(select, setting="--select"):
    """select as label matchers (namespace="uds-lab",uds_lab_release="lab"),
    stripped, or a ReportError naming the setting; "" and None: no selection."""
    if not select:
        return ""
    if not _MATCHERS.fullmatch(select):
        raise ReportError(f"{setting} {select!r}: PromQL label matchers, each name=\"value\" (or !=, =~, !~), "
                          'comma-separated, e.g. namespace="uds-lab",uds_lab_release="lab"')
    return ",".join("".join(m.groups()) for m in re.finditer(_MATCHER, select))


def _string_end(expr, i):
    """The index after the string literal that starts at expr[i]."""
    quote, j = expr[i], i + 1
    while j < len(expr) and expr[j] != quote:
        j += 2 if expr[j] == "\\" and quote != "`" else 1
    if j >= len(expr):
        raise ReportError(f"a query's string is not closed: {expr}")
    return j + 1


def _closing(expr, i, close):
    """The index of the close character that ends the bracket at expr[i],
    strings skipped (label values may hold any character)."""
    j = i + 1
    while j < len(expr) and expr[j] != close:
        j = _string_end(expr, j) if expr[j] in "\"'`" else j + 1
    if j >= len(expr):
        raise ReportError(f"a query's {expr[i]} is not closed: {expr}")
    return j


def select_series(expr, select):
    """expr with select's matchers in every series selector: added inside
    each {...}, and {select} after each series name that has none. Functions,
    keywords, label lists (by, on, ...), strings, numbers and durations stay."""
    if not select:
        return expr
    out, i, n = [], 0, len(expr)
    while i < n:
        c = expr[i]
        if c in "\"'`":
            j = _string_end(expr, i)
            out.append(expr[i:j])
        elif c == "{":
            j = _closing(expr, i, "}") + 1
            inner = expr[i + 1:j - 1].strip().rstrip(",").strip()
            out.append("{" + (inner + "," if inner else "") + select + "}")
        elif c == "[":  # a range's or subquery's duration
            j = _closing(expr, i, "]") + 1
            out.append(expr[i:j])
        elif c.isdigit() or (c == "." and expr[i + 1:i + 2].isdigit()):
            j = _NUMBER.match(expr, i).end()
            out.append(expr[i:j])
        elif _NAME.match(expr, i):
            word = _NAME.match(expr, i).group(0)
            j = i + len(word)
            k = j
            while k < n and expr[k].isspace():
                k += 1
            nxt = expr[k] if k < n else ""
            if word.lower() in _GROUPING:
                if nxt == "(":
                    j = _closing(expr, k, ")") + 1
                out.append(expr[i:j])
            elif word.lower() in _KEYWORDS or nxt == "(" or nxt == "{":
                # a keyword, a function's name, or a series' name whose {...} comes next
                out.append(word)
            else:
                out.append(word + "{" + select + "}")
        else:
            j = i + 1
            out.append(c)
        i = j
    return "".join(out)


def selecting(query, select):
    """A query function that adds select's matchers to every series selector
    of each expression before asking query; query itself where select is empty."""
    if not select:
        return query
    return lambda expr: query(select_series(expr, select))
