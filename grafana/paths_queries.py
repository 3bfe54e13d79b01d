"""The PromQL of the paths dashboard that is more than a selector: latency
quantiles, a whole process's cost shown as the path then driven, the
catalogue's breakdown terms and each path's latency over the baseline's."""
from panels import GEN, target
from report.lab import BASELINE, CATALOGUE


def quantiles(metric, sel, by, qs=(0.5, 0.95, 0.99), classic=False):
    """histogram_quantile targets over a native histogram, one per quantile; with
    classic, falling back to classic buckets (what a swapped-in app may expose)."""
    def expr(q):
        e = f"histogram_quantile({q}, sum by ({by}) (rate({metric}{{{sel}}}[$__rate_interval])))"
        if classic:
            e += f" or histogram_quantile({q}, sum by ({by}, le) (rate({metric}_bucket{{{sel}}}[$__rate_interval])))"
        return e

    return [target(expr(q), f"{{{{{by}}}}} p{round(q * 100)}") for q in qs]


def by_active_path(expr):
    """A cost with no path label (a whole process's or container's), shown as the
    path the generator was driving at that moment (the one with the most of its
    requests in the window), so each path has its own colour. Only one path runs at a time."""
    active = f"topk(1, sum by (path) (rate(openloop_requests_total{{{GEN}}}[$__rate_interval])))"
    return target(f"0 * {active} + on() group_left() ({expr})", "{{path}}")


# Measured phases only: the warm-up phases stay out, as in the report.
MEASURED = 'phase="measure"'


def p50_of(path):
    h = "openloop_request_duration_seconds"
    return f'histogram_quantile(0.5, sum(rate({h}{{job="openloop", testid=~"$testid", {MEASURED}, path="{path}"}}[$__range])))'


def breakdown_targets():
    """The catalogue's breakdown terms: one path's client p50 minus another's over
    the time range, in seconds, less the difference of two more where a term
    says so (a term whose paths did not run has no value)."""
    out = []
    # The dashboards are compose's: a Kubernetes stand-in term (instead_of) has
    # nothing to stand in for there.
    for t in (t for t in CATALOGUE["breakdown"]["terms"] if not t.get("instead_of")):
        (a, b), less = t["paths"], t.get("less")
        expr = f"{p50_of(a)} - {p50_of(b)}"
        if less:
            expr = f"({expr}) - ({p50_of(less[0])} - {p50_of(less[1])})"
        out.append(target(expr, f"{t['label']} ({a} − {b}{f' − ({less[0]} − {less[1]})' if less else ''})"))
    return out


def ratio_to_tcp(q):
    """Each path's client latency quantile over the whole range, divided by the baseline's."""
    h = "openloop_request_duration_seconds"
    return target(
        f'histogram_quantile({q}, sum by (path) (rate({h}{{job="openloop", testid=~"$testid", {MEASURED}}}[$__range])))'
        f' / on() group_left() histogram_quantile({q}, sum(rate({h}{{job="openloop", testid=~"$testid", {MEASURED}, '
        f'path="{BASELINE}"}}[$__range])))',
        "{{path}}",
    )
