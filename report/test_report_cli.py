"""`python3 -m report` end to end against a fake Prometheus on 127.0.0.1:
report.md, report.json and the charts written, a Kubernetes run's
cluster.json, a Prometheus that does not answer, a missing or misshapen
load.json (exit 2, saying where), and the Prometheus client. No Docker."""
import json
import urllib.parse
from http.server import BaseHTTPRequestHandler

import pytest

from report import cli, values
from report.prometheus import prometheus_client
from report.testkit import (
    CLUSTER, COMPOSE, fake_query, free_port, make_k6, reply_json, run_script, server_table, serving)


class FakePrometheus(BaseHTTPRequestHandler):
    """Answers /api/v1/query from a table like fake_query's."""

    table = {}

    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        if u.path != "/api/v1/query":
            self.send_error(404)
            return
        expr = urllib.parse.parse_qs(u.query)["query"][0]
        reply_json(self, fake_query(self.table)(expr))

    def log_message(self, *args):
        pass


@pytest.fixture
def prometheus():
    k6 = make_k6()
    FakePrometheus.table = server_table(k6)
    with serving(FakePrometheus) as url:
        yield k6, url


# ---------------------------------------------------------------- end to end


def test_end_to_end(tmp_path, prometheus):
    k6, url = prometheus
    run_dir = tmp_path / "t1"
    run_dir.mkdir()
    (run_dir / "load.json").write_text(json.dumps(k6))
    (run_dir / "compose.json").write_text(json.dumps(COMPOSE))
    res = run_script("--run", "t1", "--prometheus", url, "--results", str(tmp_path))
    assert res.returncode == 0, res.stderr
    md = (run_dir / "report.md").read_text()
    rep = json.loads((run_dir / "report.json").read_text())
    assert "| tcp-ka | 100.0 |" in md and "![" in md
    assert rep["testid"] == "t1" and rep["machine"]["prometheus_version"] == "3.5.1"
    assert set(rep["workloads"]["ping"]["paths"]) == {"tcp", "uds", "tcp-ka", "uds-ka"}
    for c in rep["charts"]:
        assert (run_dir / c["file"]).read_bytes()[:4] == b"\x89PNG"
    assert len(rep["charts"]) == 3  # latency, cost, where the time goes


@pytest.mark.parametrize("entries, says", [
    (0, "Loopback in the app's pod: not tracked (0 conntrack entries"),
    (412, "Loopback in the app's pod: tracked (412 conntrack entries"),
    (None, "Loopback in the app's pod: not measured"),
])
def test_a_kubernetes_run_says_where_it_ran_and_how_its_pods_merged(tmp_path, prometheus, entries, says):
    """scripts/k8s.sh's cluster.json in place of compose.json, and a run of
    two k6 pods (loadgen/merge_segments.py's "segments"): the report names the
    node, the pod network, loopback's tracking, and how quantiles were merged."""
    k6, url = prometheus
    run_dir = tmp_path / "t1"
    run_dir.mkdir()
    (run_dir / "load.json").write_text(json.dumps({**k6, "segments": {"pods": 2, "requests": [10, 11],
                                                                      "start_spread_ms": 40}}))
    (run_dir / "cluster.json").write_text(json.dumps({**CLUSTER, "lo_conntrack_entries": entries}))
    res = run_script("--run", "t1", "--prometheus", url, "--results", str(tmp_path))
    assert res.returncode == 0, res.stderr
    md = (run_dir / "report.md").read_text()
    assert "- Where: Kubernetes v1.37.2, node `n1`" in md and "cross the pod network, not a Docker bridge" in md
    assert says in md
    assert "The generator ran as 2 pods" in md and "the quantile of their pooled requests" in md
    assert "Images: app `uds-lab/app:local`, k6 `grafana/k6:1.8.1`, nginx `nginx:1.30.4`" in md
    assert "Where the time goes (Kubernetes)" in md and "Docker bridge (veth" not in md
    assert "- Placement: nginx and the app on one node (`n1`)" in md
    assert "tracked, as Docker sets it up" not in md and "no_compose" not in res.stdout


def test_prometheus_down_exits_2(tmp_path):
    (tmp_path / "t1").mkdir()
    (tmp_path / "t1" / "load.json").write_text(json.dumps(make_k6()))
    url = f"http://127.0.0.1:{free_port()}"
    res = run_script("--run", "t1", "--prometheus", url, "--results", str(tmp_path))
    assert res.returncode == 2
    assert url in res.stderr and "does not answer" in res.stderr
    assert not (tmp_path / "t1" / "report.md").exists()


def test_missing_k6_json_exits_2(tmp_path):
    res = run_script("--run", "nope", "--prometheus", "http://127.0.0.1:1", "--results", str(tmp_path))
    assert res.returncode == 2
    assert str(tmp_path / "nope" / "load.json") in res.stderr
    assert "make report RUN=<testid>" in res.stderr and "--run" not in res.stderr.split("not found")[1]
    assert "there are none: run `make load` first" in res.stderr
    for run_id in ("r1", "r2"):
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "load.json").write_text("{}")
    (tmp_path / "failed").mkdir()  # a run that wrote no load.json is not offered
    res = run_script("--run", "nope", "--prometheus", "http://127.0.0.1:1", "--results", str(tmp_path))
    assert res.returncode == 2 and "the runs there: r1, r2\n" in res.stderr


def test_prometheus_client(prometheus):
    _, url = prometheus
    query = prometheus_client(url)
    assert values.scalar(query, "count(node_cpu_seconds_total{mode=\"idle\"})") == 8
    assert values.scalar(query, "no_such_metric") is None  # empty vector: null
    with pytest.raises(values.ReportError, match="HTTP 404"):
        prometheus_client(url + "/wrong")("up")


# ---------------------------------------------------------------- load.json's shape


def test_fake_load_json_has_the_schemas_shape():
    """The fake (report/testkit.py's make_k6) is what the generators write (loadgen/test_k6.py and
    test_wrk_runner.py hold them to the same schema)."""
    import jsonschema

    schema = json.loads(cli.LOAD_SCHEMA.read_text())
    jsonschema.validate(make_k6(workloads=("ping", "cpu")), schema)
    k6 = make_k6()
    k6["settings"].update({"mode": "max", "generator": "wrk", "threads": 1})
    del k6["settings"]["rate"]
    jsonschema.validate(k6, schema)


@pytest.mark.parametrize("change, where, what", [
    (lambda k6: k6["phases"][0].update(requests="100"), "at phases/0/requests", "is not of type 'integer'"),
    (lambda k6: k6.pop("phases"), "at the top level", "'phases' is a required property"),
    (lambda k6: k6.update(base_url="http://nginx:8080"), "at the top level", "'base_url' was unexpected"),
    (lambda k6: k6["settings"].update(generator="ab"), "at settings/generator", "'ab' is not one of"),
])
def test_load_json_of_another_shape_exits_2(tmp_path, change, where, what):
    k6 = make_k6()
    change(k6)
    (tmp_path / "t1").mkdir()
    (tmp_path / "t1" / "load.json").write_text(json.dumps(k6))
    res = run_script("--run", "t1", "--prometheus", "http://127.0.0.1:1", "--results", str(tmp_path))
    assert res.returncode == 2, res.stdout
    assert f"{tmp_path / 't1' / 'load.json'} does not match load.schema.json" in res.stderr
    assert where in res.stderr and what in res.stderr, res.stderr
    assert not (tmp_path / "t1" / "report.md").exists()
