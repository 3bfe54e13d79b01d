"""The Prometheus client: the only part that touches the network.

Every endpoint of the lab's Prometheus asks for a login (compose.yaml): the
user and the password's file come from PROMETHEUS_USER and
PROMETHEUS_PASSWORD_FILE (compose sets both for `make report`; from the host,
export them: .env's values, the file relative to the checkout)."""
import base64
import json
import os
import urllib.error
import urllib.parse
import urllib.request

from report.values import ReportError


def login(environ=os.environ):
    """The Authorization header for the lab's Prometheus, or None where no
    password file is set (a Prometheus of your own without a login)."""
    path = environ.get("PROMETHEUS_PASSWORD_FILE")
    if not path:
        return None
    user = environ.get("PROMETHEUS_USER")
    if not user:
        raise ReportError("PROMETHEUS_PASSWORD_FILE is set but PROMETHEUS_USER is not: set both (.env has them)")
    try:
        password = open(path, encoding="utf-8").read().rstrip("\r\n")
    except OSError as e:
        raise ReportError(f"PROMETHEUS_PASSWORD_FILE={path}: {e.strerror} (make up writes it)") from e
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def prometheus_client(base_url, timeout=15, environ=os.environ):
    """A query function: PromQL expression -> the API's `data` ({resultType, result})."""
    base = base_url.rstrip("/")
    auth = login(environ)

    def query(expr):
        url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        req = urllib.request.Request(url, headers={"Authorization": auth} if auth else {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                body = json.load(resp)
        except urllib.error.HTTPError as e:
            if e.code == 401:
                raise ReportError(f"Prometheus at {base} refused the login (PROMETHEUS_USER, PROMETHEUS_PASSWORD_FILE: "
                                  "the password make up generated, .env)") from e
            # Prometheus answers a bad query with 400/422 and a JSON error.
            try:
                detail = json.load(e).get("error", "")
            except (ValueError, OSError):
                detail = ""
            raise ReportError(f"Prometheus at {base} rejected a query (HTTP {e.code}: {detail}): {expr}") from e
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise ReportError(f"Prometheus at {base} does not answer: {e}") from e
        if body.get("status") != "success":
            raise ReportError(f"Prometheus at {base} failed a query ({body.get('error', 'no error given')}): {expr}")
        return body.get("data", {})

    return query
