"""A stand-in for nginx on 127.0.0.1, for running the real load generators
(k6, wrk) for a second: it answers every GET (and HEAD) with 200 and as many bytes as a
/bytes/<n> route asks (else a small JSON; a /status/<code> route answers that
code, as does every route of a path set to fail), keeps connections alive like
nginx, and counts the requests per URL path."""
import json
import re
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import plan as runplan


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hits = {}
    # {URL path prefix: status}: a path that fails whatever its route (fail_paths).
    fail = {}
    lock = threading.Lock()

    def do_GET(self):
        with self.lock:
            self.hits[self.path] = self.hits.get(self.path, 0) + 1
        m = re.search(r"/bytes/([0-9]+)$", self.path)
        body = b"x" * int(m.group(1)) if m else b'{"message":"pong"}'
        code = re.search(r"/status/([0-9]{3})$", self.path)
        failing = next((c for prefix, c in self.fail.items() if self.path.startswith(prefix)), None)
        self.send_response(failing or (int(code.group(1)) if code else 200))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_HEAD = do_GET  # a replayed log's HEADs (make load TRAFFIC=)

    def log_message(self, *args):
        pass


@pytest.fixture
def local_catalogue(tmp_path):
    """(catalogue.json with every nginx at the local server, {URL path: requests})."""
    Handler.hits, Handler.fail = {}, {}
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    catalogue = runplan.read_catalogue({})
    for n in catalogue["nginx"].values():
        n["url"] = f"http://127.0.0.1:{srv.server_address[1]}"
    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps(catalogue))
    yield path, Handler.hits
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def fail_paths(local_catalogue):
    """{URL path prefix: status} of the local server: put "/uds-lo/": 502 in it
    and every request to /uds-lo/... answers 502."""
    return Handler.fail


def built(name):
    """A tool scripts/test-deps.sh builds and caches (k6, oha): its path, built
    first if missing (minutes, the first time on a machine)."""
    res = subprocess.run([str(runplan.ROOT / "scripts" / "test-deps.sh"), name], capture_output=True, text=True,
                         timeout=3600)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip().splitlines()[-1]
