"""Your traffic, read: an nginx access log turned into the requests a replay
sends, and the summary a plan prints before it starts.

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

Bad input. A line that does not parse is counted, with the field that failed.
Over TRAFFIC_MAX_BAD percent of a file's lines unparsable (default 1), or no
line parsing at all, stops the read with an error naming the file, the format
expected and the first few line numbers and fields. An empty or unreadable
file, a corrupt gzip and a wrong setting (named) are errors too.

Selection, in log order: the stretch starts at the first line whose time is
at or after TRAFFIC_FROM (an offset in seconds from the first line's time,
e.g. 90, 1.5m, 2h; or an absolute time, ISO 8601 with an offset or
dd/Mon/yyyy:hh:mm:ss +hhmm) and ends before the first line at or after
TRAFFIC_FROM + TRAFFIC_FOR (reading stops there). TRAFFIC_SAMPLE (a fraction,
default 1) then keeps each request of the stretch with that probability, one
draw per request from SEED (drawn when unset, and printed): the same seed
gives the same sample. GET and HEAD are replayable; any other method changes
state: it is counted by method and never replayed. A line whose request is
not an HTTP request line ("-", a TLS handshake sent to an HTTP port) has
method "" and is counted the same way.

Routes, for counting only: the path without its query, with each segment of
digits only, each UUID and each run of 16 or more hex digits with a digit
among them folded into {id} (/users/42/orders -> /users/{id}/orders).
Replayed requests keep their path.

Library: apachelogs (PyPI, maintained, MIT) parses Apache's formats, nginx's
combined included, but is not used here: it took 116 us a line on this
machine (a 1,000,000-line log: two minutes) where this reader takes about 15
us a combined line and 27 a JSON line (2 busy cores); every entry it returns
holds the whole line (addresses, agents) and its parse error quotes it; and it
reads no JSON. The tests use it as the oracle: on every combined line of the
samples its time, request line, status and bytes are ours. numpy gives the
quantiles; gzip and json are the standard library's.

CLI: python3 loadgen/traffic.py FILE [FILE...] prints the summary (settings
from the environment); exit 2 with one line naming the error on bad input.
"""
import calendar
import gzip
import json
import math
import os
import random
import re
import secrets
import sys
import zlib
from array import array
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import NamedTuple

import numpy as np

FORMATS = ("auto", "combined", "json")
QUERY = ("drop", "keep")
REPLAYABLE = ("GET", "HEAD")
# JSON field names per kept field: the first present in a line wins.
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
# A bad-input error names this many lines.
FIRST_BAD = 5
QUANTILES = (0.5, 0.9, 0.99)
TOP_ROUTES = 10
# Bounds of a plausible value (as nginx-log-exporter's): no request lasts a
# day, none sends a TiB, and an epoch time is between 2001 and 2096.
MAX_SECONDS = 86400
MAX_BYTES = 1 << 40
EPOCH_RANGE = (1e9, 4e9)
GZIP_MAGIC = b"\x1f\x8b"
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
DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)?")
UNIT = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}
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


@dataclass(frozen=True)
class Settings:
    format: str = "auto"
    query: str = "drop"
    start_offset: float | None = None   # seconds after the first line's time
    start_at: float | None = None       # epoch seconds
    duration: float | None = None
    sample: float = 1.0
    seed: int = 0
    max_bad: float = 1.0                # percent of a file's lines
    fields: dict = field(default_factory=lambda: {k: tuple(v.split(",")) for k, v in FIELDS.items()})


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


# --- settings ---

def read_settings(env=os.environ):
    """The TRAFFIC_* settings and SEED, validated: a wrong one is a TrafficError naming it."""
    def get(name, default=""):
        return (env.get(name) or default).strip()

    def choice(name, default, known):
        v = get(name, default)
        if v not in known:
            raise TrafficError(f'{name}="{v}": must be one of {", ".join(known)}')
        return v

    start_offset = start_at = None
    if get("TRAFFIC_FROM"):
        start_offset, start_at = parse_from(get("TRAFFIC_FROM"))
    duration = None
    if get("TRAFFIC_FOR"):
        duration = parse_duration("TRAFFIC_FOR", get("TRAFFIC_FOR"))
        if duration <= 0:
            raise TrafficError(f'TRAFFIC_FOR="{get("TRAFFIC_FOR")}": must be over 0 s')
    sample = number("TRAFFIC_SAMPLE", get("TRAFFIC_SAMPLE", "1"))
    if not 0 < sample <= 1:
        raise TrafficError(f'TRAFFIC_SAMPLE="{get("TRAFFIC_SAMPLE")}": must be a fraction over 0, at most 1')
    max_bad = number("TRAFFIC_MAX_BAD", get("TRAFFIC_MAX_BAD", "1"))
    if not 0 <= max_bad <= 100:
        raise TrafficError(f'TRAFFIC_MAX_BAD="{get("TRAFFIC_MAX_BAD")}": must be a percentage, 0 to 100')
    seed = get("SEED", str(secrets.randbelow(2**31)))
    if not re.fullmatch(r"[0-9]+", seed):
        raise TrafficError(f'SEED="{seed}": must be a whole number >= 0')
    fields = {}
    for name, env_name in FIELD_ENV.items():
        names = tuple(n.strip() for n in get(env_name, FIELDS[name]).split(",") if n.strip())
        if not names:
            raise TrafficError(f'{env_name}="{env.get(env_name)}": names no field')
        fields[name] = names
    return Settings(format=choice("TRAFFIC_FORMAT", "auto", FORMATS), query=choice("TRAFFIC_QUERY", "drop", QUERY),
                    start_offset=start_offset, start_at=start_at, duration=duration, sample=sample,
                    seed=int(seed), max_bad=max_bad, fields=fields)


def number(name, raw):
    try:
        v = float(raw)
    except ValueError:
        raise TrafficError(f'{name}="{raw}": not a number') from None
    if not math.isfinite(v):
        raise TrafficError(f'{name}="{raw}": not a finite number')
    return v


def parse_duration(name, raw):
    m = DURATION.fullmatch(raw)
    if not m:
        raise TrafficError(f'{name}="{raw}": not a duration (seconds, or a number with ms, s, m or h)')
    return float(m.group(1)) * UNIT[m.group(2)]


def parse_from(raw):
    """TRAFFIC_FROM: (offset seconds, None) or (None, epoch seconds)."""
    if DURATION.fullmatch(raw):
        return parse_duration("TRAFFIC_FROM", raw), None
    try:
        return None, parse_time_value(raw)[0]
    except LineError:
        raise TrafficError(f'TRAFFIC_FROM="{raw}": neither an offset from the log\'s start (90, 1.5m, 2h) nor a '
                           f'time with its UTC offset (2024-05-01T12:00:00+00:00, 01/May/2024:12:00:00 +0000)') from None


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


# --- files ---

def lines(path):
    """(line number, text) of each non-empty line of a plain or gzipped file."""
    try:
        with open(path, "rb") as f:
            gz = f.read(2) == GZIP_MAGIC
    except OSError as e:
        raise TrafficError(f"{path}: cannot read: {e.strerror}") from None
    n = 0
    try:
        with (gzip.open(path, "rb") if gz else open(path, "rb")) as f:
            for n, raw in enumerate(f, 1):
                text = raw.decode("utf-8", "surrogateescape").rstrip("\r\n")
                if text.strip():
                    yield n, text
    except (gzip.BadGzipFile, EOFError, zlib.error):
        raise TrafficError(f"{path}: gzip data corrupt or truncated after line {n}") from None
    except OSError as e:
        raise TrafficError(f"{path}: cannot read after line {n}: {e.strerror}") from None


FORMAT_WORDS = {"combined": "nginx's combined log_format", "json": "JSON lines (log_format ... escape=json)"}


def read_file(path, settings, tally):
    """The Requests of one file, in its order; bad lines counted in tally. Raises
    TrafficError for an empty file, or at its end when too many lines are bad."""
    keep = settings.query == "keep"
    for n, text in lines(path):
        if not tally.format:
            tally.format = settings.format if settings.format != "auto" else (
                "json" if text.lstrip().startswith("{") else "combined")
        tally.lines += 1
        try:
            if tally.format == "json":
                req, res = parse_json(text, settings.fields, keep, tally.fields_used)
            else:
                req, res = parse_combined(text, keep)
        except LineError as e:
            tally.bad_count += 1
            if len(tally.bad) < FIRST_BAD:
                tally.bad.append((n, str(e)))
            continue
        tally.parsed += 1
        tally.resolution = max(tally.resolution, res)
        yield req
    tally.complete = True
    check(tally, settings)


def check(tally, settings):
    if tally.lines == 0:
        raise TrafficError(f"{tally.path}: empty: no log line")
    where = "; ".join(f"line {n} ({why})" for n, why in tally.bad)
    expected = FORMAT_WORDS[tally.format]
    if tally.parsed == 0:
        raise TrafficError(f"{tally.path}: no line parses as {expected}: {where}")
    share = 100 * tally.bad_count / tally.lines
    if share > settings.max_bad:
        raise TrafficError(f"{tally.path}: {tally.bad_count} of {tally.lines} lines ({share:.2g}%) do not parse as "
                           f"{expected}, over TRAFFIC_MAX_BAD={settings.max_bad:g}%: first {where}")


def select(requests, settings):
    """The stretch (TRAFFIC_FROM, TRAFFIC_FOR) of a log-ordered stream, sampled
    (TRAFFIC_SAMPLE, one draw per request from SEED)."""
    rng = random.Random(settings.seed)
    begin, started = None, False
    for req in requests:
        if begin is None:
            begin = settings.start_at if settings.start_at is not None else req.time + (settings.start_offset or 0)
        if not started:
            if req.time < begin:
                continue
            started = True
        if settings.duration is not None and req.time >= begin + settings.duration:
            return
        if settings.sample < 1 and rng.random() >= settings.sample:
            continue
        yield req


def read(files, settings, tallies):
    """The selected Requests of the files, in order (all methods: replayable(req) tells);
    tallies gets one Tally per file opened. A file the stretch stopped in is judged
    on the lines read."""
    def every():
        for path in files:
            tally = Tally(str(path))
            tallies.append(tally)
            yield from read_file(path, settings, tally)
    yield from select(every(), settings)
    for tally in tallies:
        if not tally.complete:
            check(tally, settings)


def replayable(req):
    return req.method in REPLAYABLE


@lru_cache(maxsize=1 << 16)
def route(path):
    """The path without its query, ID-like segments folded into {id} (for counting only)."""
    return "/".join("{id}" if ID_SEGMENT.fullmatch(s) else s for s in path.split("?", 1)[0].split("/"))


# --- summary ---

def quantiles(values):
    """p50, p90, p99 and max, each a logged value (numpy's inverted_cdf: the smallest
    value with at least that share at or below it); None when there is none."""
    if not len(values):
        return None
    a = np.frombuffer(values, dtype=np.float64)
    qs = np.quantile(a, QUANTILES, method="inverted_cdf")
    return {"p50": float(qs[0]), "p90": float(qs[1]), "p99": float(qs[2]), "max": float(a.max())}


def summarise(files, settings):
    """Read the files; what a replay of them would send, as a dict (the plan prints format_summary of it)."""
    tallies = []
    methods, routes, per_second = Counter(), Counter(), Counter()
    sizes, request_times, upstream_times = array("d"), array("d"), array("d")
    first = last = None
    for req in read(files, settings, tallies):
        methods[req.method] += 1
        if not replayable(req):
            continue
        routes[route(req.path)] += 1
        per_second[math.floor(req.time)] += 1
        first = req.time if first is None else min(first, req.time)
        last = req.time if last is None else max(last, req.time)
        sizes.append(req.bytes)
        if req.request_time is not None:
            request_times.append(req.request_time)
        if req.upstream_time is not None:
            upstream_times.append(req.upstream_time)
    count = sum(methods[m] for m in REPLAYABLE)
    seconds_covered = (math.floor(last) - math.floor(first) + 1) if count else 0
    return {
        "files": [{"path": t.path, "format": t.format, "lines": t.lines, "parsed": t.parsed,
                   "unparsable": t.bad_count, "first_unparsable": t.bad, "time_resolution_s": t.resolution,
                   "fields": t.fields_used, "read_to_end": t.complete} for t in tallies],
        "settings": {"format": settings.format, "query": settings.query, "from_offset_s": settings.start_offset,
                     "from_time": settings.start_at, "for_s": settings.duration, "sample": settings.sample,
                     "seed": settings.seed},
        "requests": sum(methods.values()),
        "replayable": {m: methods[m] for m in REPLAYABLE if methods[m]},
        "skipped": {m: n for m, n in methods.most_common() if m not in REPLAYABLE},
        "routes": len(routes),
        "top_routes": routes.most_common(TOP_ROUTES),
        "time_resolution_s": max((t.resolution for t in tallies), default=0.0),
        "first_time": first,
        "span_s": (last - first) if count else 0.0,
        "mean_rate": count / seconds_covered if count else 0.0,
        "peak_rate": max(per_second.values(), default=0),
        "bytes": quantiles(sizes),
        "request_time_s": quantiles(request_times),
        "request_time_count": len(request_times),
        "upstream_time_s": quantiles(upstream_times),
        "upstream_time_count": len(upstream_times),
    }


def q_text(q, fmt):
    return ", ".join(f"{k} {fmt(v)}" for k, v in q.items())


def format_summary(s):
    """The summary as the lines a plan prints."""
    out = []
    for f in s["files"]:
        used = ", ".join(f"{k}={v}" for k, v in f["fields"].items())
        res = f"{f['time_resolution_s']:g} s time resolution" + (
            " (combined's $time_local: whole seconds)" if f["format"] == "combined" else "")
        out.append(f"{f['path']}: {f['format']}{' (' + used + ')' if used else ''}, {res}; {f['lines']} lines, "
                   f"{f['unparsable']} unparsable"
                   + "".join(f"{'; ' if i else ': '}line {n} ({why})" for i, (n, why) in enumerate(f["first_unparsable"]))
                   + ("" if f["read_to_end"] else "; read up to the stretch's end"))
    st = s["settings"]
    stretch = ("the whole log" if st["from_offset_s"] is None and st["from_time"] is None and st["for_s"] is None
               else "from " + (f"{st['from_offset_s']:g} s after the log's start" if st["from_offset_s"] is not None
                               else f"{datetime.fromtimestamp(st['from_time']).astimezone().isoformat()}"
                               if st["from_time"] is not None else "the log's start")
               + (f", for {st['for_s']:g} s" if st["for_s"] is not None else ""))
    out.append(f"selection: {stretch}; sample {st['sample']:g} (SEED={st['seed']}); "
               f"query strings {'kept' if st['query'] == 'keep' else 'dropped (TRAFFIC_QUERY=keep keeps them)'}")
    n = sum(s["replayable"].values())
    skipped = ", ".join(f"{m or '(no request line)'} {c}" for m, c in s["skipped"].items())
    out.append(f"requests: {s['requests']}; replayable {n} ("
               + ", ".join(f"{m} {c}" for m, c in s["replayable"].items()) + ")"
               + (f"; skipped, never replayed: {skipped}" if skipped else ""))
    out.append(f"routes: {s['routes']} (path without query, digit, UUID and 16+ hex-digit segments as {{id}}): "
               + ", ".join(f"{r} {c}" for r, c in s["top_routes"]))
    out.append(f"span: {s['span_s']:g} s; rate: mean {s['mean_rate']:.3g}/s, peak {s['peak_rate']}/s "
               f"(per whole second of the log's clock, at {s['time_resolution_s']:g} s resolution)")
    if s["bytes"]:
        out.append(f"bytes sent: {q_text(s['bytes'], lambda v: f'{v:.0f}')}")
    for key, words in (("request_time", "request time"),
                       ("upstream_time", "upstream time (sum over retries and redirects)")):
        q = s[f"{key}_s"]
        out.append(f"{words}: " + (f"{q_text(q, lambda v: f'{v:g} s')} (of {s[f'{key}_count']} requests)"
                                   if q else "not in the log"))
    return "\n".join(out)


def main(argv=None, env=os.environ):
    """python3 loadgen/traffic.py FILE [FILE...]: print the summary; 2 on bad input or settings."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.split("\n\n")[0] + "\n\nusage: traffic.py FILE [FILE...]", file=sys.stderr)
        return 2
    try:
        s = summarise(args, read_settings(env))
        print(format_summary(s))
        if not s["replayable"]:
            stretch = " ".join(f"{k}={env[k]}" for k in ("TRAFFIC_FROM", "TRAFFIC_FOR", "TRAFFIC_SAMPLE") if env.get(k))
            raise TrafficError(f"{', '.join(args)}: no GET or HEAD request in the selection"
                               f"{' (' + stretch + ')' if stretch else ''}: nothing to replay")
    except TrafficError as e:
        print(f"traffic: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
