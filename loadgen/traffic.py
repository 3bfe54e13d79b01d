"""Your traffic, read: an nginx access log (loadgen/accesslog.py reads its
lines) selected into the requests a replay sends, and the summary a plan
prints before it starts.

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

Library: numpy gives the quantiles.

CLI: python3 loadgen/traffic.py FILE [FILE...] prints the summary (settings
from the environment); exit 2 with one line naming the error on bad input.
"""
import gzip
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

import numpy as np

from accesslog import (FIELD_ENV, FIELDS, ID_SEGMENT, LineError, Tally, TrafficError, parse_combined, parse_json,
                       parse_time_value)

FORMATS = ("auto", "combined", "json")
QUERY = ("drop", "keep")
REPLAYABLE = ("GET", "HEAD")
QUANTILES = (0.5, 0.9, 0.99)
TOP_ROUTES = 10
# A bad-input error names this many lines.
FIRST_BAD = 5
GZIP_MAGIC = b"\x1f\x8b"
DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)?")
UNIT = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}


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
