"""The client logs in to the lab's Prometheus, which asks every reader to."""
import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from report.prometheus import prometheus_client
from report.values import ReportError


class LoginRequired(BaseHTTPRequestHandler):
    want = "Basic " + base64.b64encode(b"uds-lab:s3cret-s3cret-s3cret").decode()

    def do_GET(self):
        if self.headers.get("Authorization") != self.want:
            self.send_response(401)
            self.send_header("WWW-Authenticate", "Basic")
            self.end_headers()
            return
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), LoginRequired)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def password_file(tmp_path, text):
    p = tmp_path / "pw"
    p.write_text(text)
    return str(p)


def test_logs_in_with_the_labs_password(server, tmp_path):
    env = {"PROMETHEUS_USER": "uds-lab", "PROMETHEUS_PASSWORD_FILE": password_file(tmp_path, "s3cret-s3cret-s3cret\n")}
    assert prometheus_client(server, environ=env)("up") == {"resultType": "vector", "result": []}


def test_a_refused_login_says_which_settings(server, tmp_path):
    env = {"PROMETHEUS_USER": "uds-lab", "PROMETHEUS_PASSWORD_FILE": password_file(tmp_path, "wrong-wrong-wrong")}
    with pytest.raises(ReportError, match="refused the login.*PROMETHEUS_PASSWORD_FILE"):
        prometheus_client(server, environ=env)("up")
    with pytest.raises(ReportError, match="refused the login"):
        prometheus_client(server, environ={})("up")


def test_bad_settings_are_named(tmp_path):
    with pytest.raises(ReportError, match="PROMETHEUS_PASSWORD_FILE=.*missing"):
        prometheus_client("http://127.0.0.1:1", environ={"PROMETHEUS_USER": "u", "PROMETHEUS_PASSWORD_FILE": str(tmp_path / "missing")})
    with pytest.raises(ReportError, match="PROMETHEUS_USER is not"):
        prometheus_client("http://127.0.0.1:1", environ={"PROMETHEUS_PASSWORD_FILE": password_file(tmp_path, "x" * 20)})
