"""The oha runner (loadgen/oha_runner.py): oha's JSON read into the summary
wrk's Lua script gives, and the real oha (built by scripts/test-deps.sh at
.env's version) run for a second per phase against a server on 127.0.0.1 and
on a Unix socket, as the direct paths reach the app: load.json of the
schema's shape, every phase with requests, the socket's phase over the socket."""
import json
import os
import socketserver
import subprocess
import sys
import threading

import jsonschema
import pytest

import oha_runner
import plan as runplan
from conftest import Handler, built

OHA_JSON = {
    "summary": {"successRate": 0.99, "total": 2.0, "slowest": 0.02, "fastest": 0.0001, "average": 0.001,
                "requestsPerSec": 5000.0},
    "latencyPercentiles": {"p50": 0.0009, "p90": 0.0015, "p95": 0.002, "p99": 0.004, "p99.9": 0.01},
    "statusCodeDistribution": {"200": 9890, "502": 10},
    "errorDistribution": {"connection closed before message completed": 100, "aborted due to deadline": 2},
}


def test_ohas_json_is_read_as_wrks_summary():
    w = oha_runner.summary(OHA_JSON)
    assert (w["requests"], w["errors"], w["non_2xx_3xx"], w["duration_s"]) == (10000, 110, 10, 2.0)
    assert w["by_kind"] == {"connection closed before message completed": 100}
    assert w["latency_ms"] == pytest.approx({"avg": 1.0, "p50": 0.9, "p90": 1.5, "p95": 2.0, "p99": 4.0, "p999": 10.0,
                                             "max": 20.0})
    empty = oha_runner.summary({"summary": {"total": 1.0, "average": None, "slowest": None},
                                "latencyPercentiles": {}, "statusCodeDistribution": {}, "errorDistribution": {}})
    assert empty["requests"] == 0 and empty["latency_ms"]["p50"] is None


def test_the_command_dials_the_socket_only_for_a_socket_path():
    s = {"connections": 8}
    tcp = oha_runner.command(s, {"duration_s": 3}, "http://127.0.0.1:8080/ping")
    assert tcp == ["oha", "--no-tui", "--output-format", "json", "-z", "3s", "-c", "8", "http://127.0.0.1:8080/ping"]
    uds = oha_runner.command(s, {"duration_s": 3, "socket": "/sock/app.sock", "connections": 2}, "http://app/ping")
    assert uds[-4:] == ["2", "--unix-socket", "/sock/app.sock", "http://app/ping"]
    # A sweep's rate: held with -q, latencies corrected; connections for 100 ms per request, at most 1,000.
    swept = oha_runner.command(s, {"duration_s": 3, "rate": 5000}, "http://nginx:8080/tcp/ping")
    assert swept[6:] == ["-c", "500", "-q", "5000", "--latency-correction", "http://nginx:8080/tcp/ping"]
    assert oha_runner.command(s, {"duration_s": 3, "rate": 50}, "u")[7] == "8"
    assert oha_runner.command(s, {"duration_s": 3, "rate": 50000}, "u")[7] == "1000"


@pytest.fixture(scope="module")
def oha():
    return built("oha")


class OverTheSocket(Handler):
    """The local server's handler, counting on its own what came over the socket."""
    hits = {}


class UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):  # BaseHTTPRequestHandler wants a (host, port) client address
        conn, _ = super().get_request()
        return conn, ("local", 0)


def test_oha_runs_the_direct_paths_and_one_through_nginx(oha, tmp_path, local_catalogue):
    catalogue_path, hits = local_catalogue
    catalogue = json.loads(catalogue_path.read_text())
    sock = tmp_path / "app.sock"
    OverTheSocket.hits = {}
    srv = UnixHTTPServer(str(sock), OverTheSocket)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    direct = catalogue["direct"]["paths"]
    direct["direct-tcp"]["url"] = catalogue["nginx"]["nginx"]["url"]  # the local server stands in for the app
    direct["direct-uds"]["socket"] = str(sock)
    catalogue_path.write_text(json.dumps(catalogue))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "oha").symlink_to(oha)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CATALOGUE": str(catalogue_path),
           "RESULTS": str(tmp_path), "TESTID": "o1", "PATHS": "direct-tcp,direct-uds,uds-ka", "SCENARIO": "ping",
           "ROUNDS": "1", "WARMUP": "0", "DURATION": "1", "CONNECTIONS": "2", "IDLE": "0"}
    try:
        res = subprocess.run([sys.executable, str(runplan.HERE / "oha_runner.py")], env=env, capture_output=True,
                             text=True, timeout=60)
    finally:
        srv.shutdown()
        srv.server_close()
    assert res.returncode == 0, res.stdout + res.stderr
    assert "uds-lab oha run o1: max throughput, 2 connections" in res.stdout
    load = json.loads((tmp_path / "o1" / "load.json").read_text())
    jsonschema.validate(load, json.loads(runplan.SCHEMA.read_text()))
    assert load["settings"]["generator"] == "oha"
    by_path = {p["path"]: p for p in load["phases"]}
    assert all(p["requests"] > 0 and p["failed_rate"] == 0 and "p999" in p["duration_ms"] for p in by_path.values())
    # direct-uds's requests came over the socket, the others over TCP.
    assert OverTheSocket.hits == {"/ping": OverTheSocket.hits.get("/ping", 0)}
    assert OverTheSocket.hits["/ping"] >= by_path["direct-uds"]["requests"]
    assert hits.get("/ping", 0) >= by_path["direct-tcp"]["requests"] and hits.get("/uds-ka/ping", 0) >= by_path["uds-ka"]["requests"]
