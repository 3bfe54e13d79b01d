"""An nginx access log read, line by line: what loadgen/traffic.py (your
traffic's settings, selection and summary) and loadgen/replay.py build on.

What it reads. One or more files, plain or gzipped (told by the gzip magic
bytes, not the name), read as a stream in the order given (rotated logs:
oldest first), each in one of two formats:
- combined: nginx's default log_format
    $remote_addr - $remote_user [$time_local] "$request" $status
    $body_bytes_sent "$http_referer" "$http_user_agent"
  with anything after the user agent allowed and ignored (the official nginx
  image's `main` adds "$http_x_forwarded_for"). nginx's \\xHH escapes (and
  Apache's \\" and \\\\) in the request line are undone. $time_local has 1 s
  resolution: times, spans and rates from it are whole seconds.
- json: one JSON object per line (log_format ... escape=json). Each field is
  looked up by a list of names, the first present wins (TRAFFIC_*_FIELD, a
  comma list, defaults in FIELDS). Values may be JSON strings or numbers; ""
  and "-" mean absent (escape=json writes "" for an unset variable). The
  time is epoch seconds ($msec: 1 ms resolution), ISO 8601 with an offset
  ($time_iso8601) or $time_local's form. The request is $request (the
  request line) or a method field and a path field ($request_uri as sent, or
  $uri: decoded and normalised by nginx).
TRAFFIC_FORMAT=auto (the default) takes json for a file whose first non-empty
line starts with "{", else combined.

What it keeps, from each line only: the time (epoch seconds, float, from the
log's own clock: nginx writes it when the response ends), the method, the path
(query string dropped unless TRAFFIC_QUERY=keep; an absolute-form target's
scheme and host dropped; bytes outside printable ASCII percent-encoded so the
path can be sent as logged), the status, the bytes sent, and the request's and
upstream's times where the log has them. Nothing else of a line (client
address, user, referrer, user agent, other fields, the line's text) is kept in
what this module returns, nor printed, nor put in an error: errors name the
file, the line number and the field that failed, never its content. A path
itself is kept as logged: a token written into the path (not the query) stays.

$upstream_response_time comes in every form nginx documents: "-" or "" (no
upstream: None), "0.002" (one), "0.002, 0.004" (retried on the next server of
the group) and "0.002 : 0.004" (an internal redirect to another group, e.g.
X-Accel-Redirect or error_page); a "-" part (a server not reached) counts
nothing. The sum is kept: every part was time this request waited on an
upstream, which is what an emulation must spend to give the request its
logged shape (the lab's nginx-log-exporter sums them the same way).

Library: apachelogs (PyPI, MIT) parses nginx's combined format but took 116
us a line here (this reader 15, 27 for JSON), returns and quotes whole lines
(addresses, agents) and reads no JSON: the tests use it as the oracle on
every combined line of the samples. gzip and json are the standard library's.
"""
import calendar
import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

# JSON field names per kept field, the first present in a line winning
# (TRAFFIC_*_FIELD, loadgen/traffic.py's settings, gives others).
FIELDS = {
    "time": "msec,time_iso8601,time_local,time,timestamp,@timestamp",
    "request": "request",
    "method": "request_method,method",
    "path": "request_uri,uri,path",
    "status": "status",
    "bytes": "body_bytes_sent,bytes_sent",
    "request_time": "request_time",
    "upstream_time": "upstream_response_time",
}
FIELD_ENV = {name: f"TRAFFIC_{name.upper()}_FIELD" for name in FIELDS}
# Bounds of a plausible value (as nginx-log-exporter's): no request lasts a
# day, none sends a TiB, and an epoch time is between 2001 and 2096.
MAX_SECONDS = 86400
MAX_BYTES = 1 << 40
EPOCH_RANGE = (1e9, 4e9)
MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
                                      "Nov", "Dec"), 1)}
CLF_TIME = r"\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}"
QUOTED = r'"(?:[^"\\]|\\.)*"'
# combined, piece by piece: a line that fails is named by the first piece
# that does not match. Address, user, referrer and agent are matched, never captured.
COMBINED_PIECES = (
    ("time", rf"\S+ \S+ .*? \[(?P<time>{CLF_TIME})\] "),
    ("request", r'"(?P<request>(?:[^"\\]|\\.)*)" '),
    ("status", r"(?P<status>\d{3}) "),
    ("bytes", r"(?P<bytes>\d+|-) "),
    ("referrer", QUOTED + " "),
    ("user agent", QUOTED),
    ("end of line", r"(?: .*)?"),
)
COMBINED = re.compile("".join(p for _, p in COMBINED_PIECES))
SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")
ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]{2}|.)")
# What a path cannot hold as sent: percent-encoded.
UNSAFE = re.compile(r"[^\x21-\x7e]")
TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
ID_SEGMENT = re.compile(r"[0-9]+|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
                        r"|(?=[a-zA-Z]*[0-9])[0-9a-fA-F]{16,}")


class TrafficError(ValueError):
    """Bad input or a bad setting: the message names the file and line, or the setting."""


class LineError(ValueError):
    """One line that does not parse: the field that failed and why, never its value."""

    def __init__(self, field, why):
        super().__init__(f"{field}: {why}")
        self.field = field


class Request(NamedTuple):
    """One logged request: all that is kept of its line."""
    time: float            # epoch seconds, the log's own clock (when the response ended)
    method: str            # "" when the line holds no HTTP request line
    path: str
    status: int
    bytes: int
    request_time: float | None
    upstream_time: float | None   # the sum over retries and redirects; None: no upstream


@dataclass
class Tally:
    """What reading one file found: counts, never content."""
    path: str
    format: str = ""
    lines: int = 0
    parsed: int = 0
    bad: list = field(default_factory=list)    # (line number, "field: why") of the first FIRST_BAD
    bad_count: int = 0
    resolution: float = 0.0                      # the coarsest time resolution seen, s
    fields_used: dict = field(default_factory=dict)   # json: the name each kept field was read from
    complete: bool = False                       # read to its end (a stretch may stop earlier)


# --- one line ---

def clf_time(s):
    """$time_local's dd/Mon/yyyy:hh:mm:ss +hhmm as epoch seconds."""
    month = MONTHS.get(s[3:6])
    if month is None or not re.fullmatch(CLF_TIME, s):
        raise LineError("time", "not dd/Mon/yyyy:hh:mm:ss +hhmm")
    try:
        datetime(int(s[7:11]), month, int(s[0:2]), int(s[12:14]), int(s[15:17]), int(s[18:20]))
    except ValueError:
        raise LineError("time", "not a date") from None
    offset = (int(s[22:24]) * 3600 + int(s[24:26]) * 60) * (-1 if s[21] == "-" else 1)
    return calendar.timegm((int(s[7:11]), month, int(s[0:2]), int(s[12:14]), int(s[15:17]), int(s[18:20]))) - offset


def parse_time_value(v):
    """A JSON time (or TRAFFIC_FROM's absolute time): (epoch seconds, resolution s)."""
    if isinstance(v, bool):
        raise LineError("time", "not a time")
    if isinstance(v, (int, float)):
        t, res = float(v), (1.0 if float(v).is_integer() else 0.001)
    elif isinstance(v, str) and SECONDS.fullmatch(v):
        t, res = float(v), 10.0 ** -len(v.partition(".")[2])
    elif isinstance(v, str) and re.fullmatch(CLF_TIME, v):
        t, res = float(clf_time(v)), 1.0
    elif isinstance(v, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})", v):
        try:
            d = datetime.fromisoformat(v)
        except ValueError:
            raise LineError("time", "not a date") from None
        t = d.timestamp()
        frac = re.search(r"\.(\d+)", v)
        res = 10.0 ** -len(frac.group(1)) if frac else 1.0
    else:
        raise LineError("time", "not epoch seconds, ISO 8601 with an offset, nor dd/Mon/yyyy:hh:mm:ss +hhmm")
    if not EPOCH_RANGE[0] <= t <= EPOCH_RANGE[1]:
        raise LineError("time", "not between 2001 and 2096 (epoch seconds expected, not ms)")
    return t, res


def seconds(name, v):
    """A request or upstream time: seconds >= 0 (nginx: "0.002"), or None for "", "-" or absent."""
    if v is None or v == "" or v == "-":
        return None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        v = float(v)
        if not (math.isfinite(v) and 0 <= v <= MAX_SECONDS):
            raise LineError(name, f"not seconds from 0 to {MAX_SECONDS}")
        return v
    if isinstance(v, str) and SECONDS.fullmatch(v) and float(v) <= MAX_SECONDS:
        return float(v)
    raise LineError(name, f"not seconds from 0 to {MAX_SECONDS}")


def upstream_seconds(v):
    """$upstream_response_time in every documented form, summed: "0.002", "0.002, 0.004"
    (retries), "0.002 : 0.004" (internal redirect), "-" parts (not reached) count nothing;
    None when no part is a time."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return seconds("upstream_time", v)
    if v is None:
        return None
    if not isinstance(v, str):
        raise LineError("upstream_time", "not a list of seconds")
    parts = [p.strip() for p in re.split(r"[,:]", v)]
    times = [seconds("upstream_time", p) for p in parts if p not in ("", "-")]
    return sum(times) if times else None


def whole(name, v, maximum):
    if isinstance(v, int) and not isinstance(v, bool):
        n = v
    elif isinstance(v, str) and re.fullmatch(r"[0-9]+", v):
        n = int(v)
    else:
        raise LineError(name, "not a whole number")
    if n > maximum:
        raise LineError(name, f"over {maximum}")
    return n


def unescape(s):
    """nginx's \\xHH (and Apache's \\" \\\\) escapes undone, byte for byte: "caf\\xC3\\xA9" is "café"
    (bytes that are not UTF-8 stay as surrogates, percent-encoded back by clean_path)."""
    if "\\" not in s:
        return s
    out, pos = bytearray(), 0
    for m in ESCAPE.finditer(s):
        out += s[pos:m.start()].encode("utf-8", "surrogateescape")
        e = m.group(1)
        out += bytes([int(e[1:], 16)]) if len(e) == 3 else e.encode("utf-8", "surrogateescape")
        pos = m.end()
    out += s[pos:].encode("utf-8", "surrogateescape")
    return out.decode("utf-8", "surrogateescape")


def clean_path(target, keep_query):
    """The path to send: absolute form's scheme and host dropped, the query dropped unless
    kept, bytes outside printable ASCII percent-encoded."""
    if target.startswith(("http://", "https://")):
        rest = target.split("://", 1)[1]
        cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
        target = rest[cut:]
        target = target if target.startswith("/") else "/" + target
    if not keep_query:
        target = target.split("?", 1)[0]
    if not UNSAFE.search(target):
        return target
    return "".join(c if " " < c < "\x7f" else "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogateescape"))
                   for c in target)


def request_line(line, keep_query):
    """(method, path) of "GET /p HTTP/1.1" or "GET /p"; ("", "") when it is no HTTP request line."""
    parts = line.split(" ")
    if len(parts) == 3 and parts[2].startswith("HTTP/") or len(parts) == 2:
        method, target = parts[0], parts[1]
        if TOKEN.fullmatch(method) and target:
            return method, clean_path(target, keep_query)
    return "", ""


_last_time = ("", 0.0)


def parse_combined(text, keep_query):
    """One combined line: (Request, time resolution s)."""
    global _last_time
    m = COMBINED.fullmatch(text)
    if not m:
        raise LineError(*combined_failure(text))
    stamp = m.group("time")
    if stamp != _last_time[0]:
        _last_time = (stamp, float(clf_time(stamp)))
    method, path = request_line(unescape(m.group("request")), keep_query)
    size = m.group("bytes")
    size = 0 if size == "-" else int(size)
    if size > MAX_BYTES:
        raise LineError("bytes", f"over {MAX_BYTES}")
    return Request(_last_time[1], method, path, int(m.group("status")), size, None, None), 1.0


def combined_failure(text):
    """The first piece of the combined format a line does not match, and what was expected."""
    pattern = ""
    for i, (name, piece) in enumerate(COMBINED_PIECES):
        pattern += piece
        last = i == len(COMBINED_PIECES) - 1
        if not (re.fullmatch if last else re.match)(pattern, text):
            return name, "not as nginx's combined log_format writes it"
    return "line", "not as nginx's combined log_format writes it"


def first_present(obj, names):
    for name in names:
        v = obj.get(name)
        if v is not None and v != "" and v != "-":
            return name, v
    return None, None


def parse_json(text, fields, keep_query, used):
    """One JSON line: (Request, time resolution s). used: {kept field: the name it was read from}."""
    try:
        obj = json.loads(text)
    except ValueError:
        raise LineError("json", "not a JSON object (truncated or not escape=json)") from None
    if not isinstance(obj, dict):
        raise LineError("json", "not a JSON object")

    def need(kind):
        name, v = first_present(obj, fields[kind])
        if name is None:
            raise LineError(kind, f"no field {' or '.join(fields[kind])} ({FIELD_ENV[kind]})")
        used.setdefault(kind, name)
        return v

    t, res = parse_time_value(need("time"))
    name, req = first_present(obj, fields["request"])
    if name is None and any(n in obj for n in fields["request"]):
        method, path = "", ""      # "" or "-": nginx read no request line (a 400 or 408)
    elif name is not None:
        if not isinstance(req, str):
            raise LineError("request", "not a request line")
        used.setdefault("request", name)
        method, path = request_line(req, keep_query)
    else:
        method, path = need("method"), need("path")
        if not (isinstance(method, str) and TOKEN.fullmatch(method)):
            raise LineError("method", "not an HTTP method")
        if not isinstance(path, str) or not path.startswith(("/", "http://", "https://")):
            raise LineError("path", "not a path starting with /")
        path = clean_path(path, keep_query)
    status = whole("status", need("status"), 999)
    size = whole("bytes", need("bytes"), MAX_BYTES)
    rname, rv = first_present(obj, fields["request_time"])
    uname, uv = first_present(obj, fields["upstream_time"])
    for kind, name in (("request_time", rname), ("upstream_time", uname)):
        if name is not None:
            used.setdefault(kind, name)
    return Request(t, method, path, status, size, seconds("request_time", rv), upstream_seconds(uv)), res
