"""The Prometheus client: the only part that touches the network."""
import json
import urllib.error
import urllib.parse
import urllib.request

from report.values import ReportError


def prometheus_client(base_url, timeout=15):
    """A query function: PromQL expression -> the API's `data` ({resultType, result})."""
    base = base_url.rstrip("/")

    def query(expr):
        url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:
                body = json.load(resp)
        except urllib.error.HTTPError as e:
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
