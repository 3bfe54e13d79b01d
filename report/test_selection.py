"""The report on a shared Prometheus (make k8s-report K8S_PROMETHEUS=...):
every series selector of every query carries the release's matchers
(--select), so another workload's or another release's series of the same
names never reach its figures; scripts/k8s.sh passes the namespace and the
release. No network beyond 127.0.0.1, no cluster."""
import json
import os
import re
import stat
import subprocess
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from report import selection
from report.testkit import COMPOSE, fake_query, make_k6, reply_json, run_script, server_table, serving
from report.values import ReportError

ROOT = Path(__file__).resolve().parent.parent
SELECT = 'namespace="uds-lab",uds_lab_release="lab"'


@pytest.mark.parametrize("expr, want", [
    ('up{job="app"}', 'up{job="app",NS}'),
    ("max(node_memory_MemTotal_bytes)", "max(node_memory_MemTotal_bytes{NS})"),
    ("up{}", "up{NS}"),
    ('{__name__="up"}', '{__name__="up",NS}'),
    ('count(node_cpu_seconds_total{mode="idle"})', 'count(node_cpu_seconds_total{mode="idle",NS})'),
    ("node_context_switches_total[30s] @ 1763820000.500", "node_context_switches_total{NS}[30s] @ 1763820000.500"),
    ('histogram_quantile(0.99, sum by (le) (increase(b_bucket{job="app"}[20s] @ 17.5)))',
     'histogram_quantile(0.99, sum by (le) (increase(b_bucket{job="app",NS}[20s] @ 17.5)))'),
    ("sum(rate(x[5m] offset 1h)) by (job) > bool 1e3", "sum(rate(x{NS}[5m] offset 1h)) by (job) > bool 1e3"),
    ("a / on(pod) group_left(node) b or vector(0)", "a{NS} / on(pod) group_left(node) b{NS} or vector(0)"),
    # Label values hold any character: braces, commas and quotes stay theirs.
    (r'max(up{job="a{b}",path=~"x,\"y\""})', r'max(up{job="a{b}",path=~"x,\"y\"",NS})'),
    ('label_replace(up{job="app"}, "to", "$1", "job", "(.*)")',
     'label_replace(up{job="app",NS}, "to", "$1", "job", "(.*)")'),
    ("max(max_over_time(up{job=\"app\"}[60s:5s] @ end()))", "max(max_over_time(up{job=\"app\",NS}[60s:5s] @ end()))"),
    # An escaped quote does not end its value (an odd one: the case above pairs them, which hid it).
    (r'up{job="a\"b"}', r'up{job="a\"b",NS}'),
    (r'max(up{path=~"a\"}b"}) or x', r'max(up{path=~"a\"}b",NS}) or x{NS}'),
    (r'label_replace(up, "to", "a\"b", "job", "(.*)")', r'label_replace(up{NS}, "to", "a\"b", "job", "(.*)")'),
])
def test_every_series_selector_gets_the_matchers(expr, want):
    assert selection.select_series(expr, SELECT) == want.replace("NS", SELECT)


def test_no_selection_leaves_the_query_as_it_is():
    q = fake_query({})
    assert selection.selecting(q, "") is q
    assert selection.select_series('up{job="app"}', "") == 'up{job="app"}'


@pytest.mark.parametrize("bad", ['namespace=uds-lab', 'namespace="uds-lab" uds_lab_release="lab"', "{}", 'a="b",',
                                 '1a="b"', 'namespace="x"}) or vector(1'])
def test_bad_matchers_are_refused_naming_the_setting(bad):
    with pytest.raises(ReportError, match=r"^--select .*PromQL label matchers"):
        selection.matchers(bad)


def test_matchers_are_normalised():
    assert selection.matchers(' namespace = "uds-lab" , uds_lab_release="lab"') == SELECT
    assert selection.matchers(None) == ""
    assert selection.matchers(r'path="a\"b" ,job="x"') == r'path="a\"b",job="x"'  # the escaped quote is the value's


# ---------------------------------------------------------------- a shared Prometheus, end to end

def carries(expr, select=SELECT):
    """Whether every selector of expr ({...}) holds select, and expr has one."""
    blocks = re.findall(r"\{(?:[^{}\"]|\"(?:[^\"\\]|\\.)*\")*\}", expr)
    return bool(blocks) and all(select in b for b in blocks)


class SharedPrometheus(BaseHTTPRequestHandler):
    """A cluster's Prometheus that scrapes this release and another with the
    same job names: a query with this release's matchers in every selector
    gets this release's figures, any other the two releases' summed."""

    mine, both, seen = {}, {}, []

    def do_GET(self):
        expr = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)["query"][0]
        self.seen.append(expr)
        reply_json(self, fake_query(self.mine if carries(expr) else self.both)(expr))

    def log_message(self, *args):
        pass


@pytest.fixture
def shared():
    k6 = make_k6(paths=("tcp", "uds"), rounds=1)
    SharedPrometheus.mine = server_table(k6)
    # The other release's app used 10 times the CPU for as many requests.
    SharedPrometheus.both = server_table(k6, {"app_http_requests_total": 2000, "process_cpu_seconds_total": 0.55})
    SharedPrometheus.seen = []
    with serving(SharedPrometheus) as url:
        yield k6, url


def report_on(tmp_path, shared):
    """make k8s-report's report on the shared Prometheus, with the release's
    matchers: its run's folder."""
    k6, url = shared
    (tmp_path / "t1").mkdir()
    (tmp_path / "t1" / "load.json").write_text(json.dumps(k6))
    (tmp_path / "t1" / "compose.json").write_text(json.dumps(COMPOSE))
    res = run_script("--run", "t1", "--prometheus", url, "--results", str(tmp_path), "--select", SELECT)
    assert res.returncode == 0, res.stderr
    return tmp_path / "t1"


def test_on_a_shared_prometheus_the_report_reads_its_release_alone(tmp_path, shared):
    rep = json.loads((report_on(tmp_path, shared) / "report.json").read_text())
    # 0.05 s of CPU for 1000 requests: this release's app alone.
    assert rep["phases"][0]["figures"]["app_cpu_us_per_req"] == pytest.approx(50)
    assert rep["prometheus_select"] == SELECT
    assert SharedPrometheus.seen and all(carries(q) for q in SharedPrometheus.seen)


def test_every_query_the_report_sends_parses_with_prometheus_own_parser(tmp_path, shared):
    """Every query of a report on a shared Prometheus, its matchers added, as
    Prometheus's own PromQL parser reads it: promtool (scripts/test-deps.sh's
    build, at .env's version) checks each as a recording rule's expression."""
    report_on(tmp_path, shared)
    queries = sorted(set(SharedPrometheus.seen))
    assert queries
    dep = subprocess.run([str(ROOT / "scripts" / "test-deps.sh"), "promtool"], capture_output=True, text=True,
                         timeout=3600)
    assert dep.returncode == 0, dep.stderr
    promtool = dep.stdout.strip().splitlines()[-1]
    rules = tmp_path / "rules.yml"
    rules.write_text(json.dumps({"groups": [{"name": "report", "rules": [
        {"record": f"report:query_{i}", "expr": q} for i, q in enumerate(queries)]}]}))
    check = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, f"{len(queries)} queries: {check.stdout}{check.stderr}"


def test_a_bad_selection_stops_the_report_naming_it(tmp_path):
    (tmp_path / "t1").mkdir()
    (tmp_path / "t1" / "load.json").write_text(json.dumps(make_k6()))
    res = run_script("--run", "t1", "--prometheus", "http://127.0.0.1:1", "--results", str(tmp_path),
                     "--select", "namespace=uds-lab")
    assert res.returncode == 2
    assert "--select 'namespace=uds-lab': PromQL label matchers" in res.stderr


# ---------------------------------------------------------------- scripts/k8s.sh

def executable(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.mark.parametrize("prometheus, want", [
    ("monitoring/kube-prometheus-stack-prometheus:9090", ["--select", 'namespace="lab-ns",uds_lab_release="lab2"']),
    (None, []),
])
def test_k8s_report_selects_the_release_on_the_clusters_prometheus(tmp_path, prometheus, want):
    """make k8s-report: with K8S_PROMETHEUS the report selects the release's
    namespace and name; with the release's own Prometheus, nothing (it
    scrapes this release alone). kubectl, helm and Python are stand-ins that
    record how they are called."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    executable(bin_ / "kubectl", """#!/bin/sh
case "$*" in
*port-forward*) echo "Forwarding from 127.0.0.1:40000 -> 9090"; exec sleep 30 ;;
*secret*) printf c2VjcmV0 ;;
esac
""")
    executable(bin_ / "helm", """#!/bin/sh
echo '{"prometheus": {"enabled": true, "user": "uds-lab"}}'
""")
    args = tmp_path / "args"
    # The script reads the release's values with Python too (-c): those run.
    executable(bin_ / "python", f"""#!/bin/sh
[ "$1" != -c ] || exec {sys.executable} "$@"
for a in "$@"; do printf '%s\\n' "$a"; done >{args}
""")
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "PYTHON": str(bin_ / "python"), "RUN": "t1",
           "K8S_NAMESPACE": "lab-ns", "K8S_RELEASE": "lab2"}
    env.pop("K8S_PROMETHEUS", None)
    if prometheus:
        env["K8S_PROMETHEUS"] = prometheus
    res = subprocess.run([str(ROOT / "scripts" / "k8s.sh"), "report"], env=env, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    got = args.read_text().splitlines()
    assert got[:5] == ["-m", "report", "--run", "t1", "--prometheus"] and got[5].startswith("http://127.0.0.1:40000")
    assert got[6:] == want
