"""The answer and the breakdown in words (pure): each comparison of the answer
as a row (its verdict, figures, a short verdict in words and a phrase:
report.json's answer_parts, which the markdown renders), the answer as a
paragraph, a difference as the report words it, the controls, and why a
failing path gets no verdict. One module for the words, so that the JSON
and report.md say the same."""
from report import interleaved
from report.breakdown import MAX_FAILED_SHARE, answer_terms, breakdown, failed_paths, figures_for
from report.lab import TERMS, listener_of, nginx_of
from report.lab import margin_pct as margin_pct_setting
from report.stats import (ALPHA, ANSWER_ALPHA, fmt_interval, has_interval, judge, lost_to, measurable, no_interval,
                          significant)
from report.values import generator, is_max
from report.verdicts import (MIN_DOF_TO_PROJECT, MOST_ROUNDS_TO_DECIDE, MOST_TO_DECIDE, POWER, dof_of, lost_to_holm,
                             projected, three_way)

# The connection handlings the answer speaks of, in its words.
HANDLING = {"new": "with a new connection per request", "pooled": "with pooled keepalive connections"}


def pooled_words(reasons):
    """How the answer names its pooled comparisons: as pooled, or, where the
    paths did not pool, as what they were."""
    if not reasons:
        return HANDLING["pooled"]
    why = "; ".join(dict.fromkeys(reasons.values()))
    return f"on the keepalive (-ka) paths, which did not reuse connections here ({why})"


def judged_together(d):
    """How a correction that took d back is said: the report's comparisons
    judged together (Benjamini-Hochberg), or None."""
    return (f"once the report's {d['fdr_family']} comparisons are judged together (Benjamini-Hochberg)"
            if lost_to(d) == "fdr" else None)


def fmt_diff(d, unit="µs", share=True):
    """A difference as the report words it: a number only when it is
    measurable, always with its interval; share adds it as a share of the
    first path's figure."""
    if d is None:
        return "n/a"
    u = f" {unit}" if unit else ""
    if not has_interval(d):
        return f"{d['mean']:,.1f}{u} ({no_interval(d)}: no interval, no verdict)"
    ci = fmt_interval(d, unit)
    if lost_to_holm(d):
        return f"no measurable difference once the answer's comparisons are judged together ({ci} alone)"
    if judged_together(d):
        return f"no measurable difference {judged_together(d)} ({ci} alone)"
    if significant(d) and not measurable(d):
        return f"below the counter's resolution ({d['resolution']:,.1f}{u}; {ci})"
    if not measurable(d):
        return f"no measurable difference ({ci})"
    rel = f", {d['relative']:.0%} of the first" if share and d.get("relative") else ""
    return f"{d['mean']:,.1f}{u} ({ci}{rel})"


def control_note(terms, figure="client_p50_ms", unit="µs", decimals=0):
    """The controls' verdicts in words, and a warning where one failed."""
    out = []
    for t in TERMS:
        if not t.get("control") or t["key"] not in terms:
            continue
        d = terms[t["key"]]["figures"].get(figure)
        if d is None:
            continue
        if measurable(d):
            out.append(f"**the control failed**: {t['label'].removeprefix('control: ')} came out at {d['mean']:,.{decimals}f} {unit} "
                       f"({fmt_interval(d, unit, decimals)}): the two nginx differ, so the comparisons across "
                       "them (the bridge) carry that difference; the same-nginx pairs do not")
        else:
            out.append(f"control held: {t['label'].removeprefix('control: ')}, {fmt_diff(d, unit, share=False)}")
    return out


def failure_cause(path, statuses):
    """What a failing path's commonest failure most likely means."""
    st = {k: n for k, n in statuses.items() if n and k != "0"} or {k: n for k, n in statuses.items() if n}
    top = max(st, key=st.get) if st else None
    socket = listener_of(path) == "unix"
    if top == "502":
        return ("nginx could not connect to the app's socket: its mode or group keeps nginx out (make contract), its "
                "listen backlog overflowed (net.core.somaxconn), or the app is down" if socket else
                "nginx could not connect to the app's TCP port: the app is down or not listening there, or its "
                "backlog overflowed")
    if top == "504":
        return "the app did not answer within nginx's proxy_read_timeout"
    if top == "503":
        return "nginx's connection budget (or the app's own limit) turned them away"
    if top in ("0", "refused", "reset", "timeout", "connect_timeout"):
        return "no response reached the generator: nginx refused or reset the connection, or the request timed out"
    return "see the statuses"


def failed_words(t, failed):
    """The answer table's verdict for a pair with a path past
    MAX_FAILED_SHARE ("no verdict: uds-lo failed 40%"), else None."""
    f = failed_paths(t, failed)
    return "no verdict: " + ", ".join(f"{p} failed {s:.0%}" for p, s in f) if f else None


def failed_phrase(t, failed):
    """No verdict for an answer pair with a path past MAX_FAILED_SHARE, in
    words: the path, its share and statuses, the likely cause; else None."""
    out = []
    for path, share in failed_paths(t, failed):
        f = failed[path]
        st = ", ".join(f"{k}: {n:,}" for k, n in sorted(f["statuses"].items(), key=lambda kv: -kv[1]) if n)
        out.append(f"`{path}` failed {share:.0%} of its requests ({st or 'no status'}): "
                   f"{failure_cause(path, f['statuses'])}")
    if not out:
        return None
    a, b = t["paths"]
    return (f"**no verdict** against {t['against']} (`{b}` against `{a}`): " + "; ".join(out)
            + f" (more than {MAX_FAILED_SHARE:.0%} failed: its successes alone are timed, so no difference is read)")


def answer(w, phases, settings, terms=None, unpooled=None, route=None, failed=None, margin_pct=None, parts=None):
    """The answer for one workload in plain words (report.json's "answer"):
    answer_parts() (parts, if already computed) as one paragraph; margin_pct: MARGIN (lab.margin_pct())."""
    if is_max(settings):
        return max_answer(w, phases, settings, unpooled, terms, failed)
    parts = parts or answer_parts(w, phases, settings, terms, unpooled, route, failed, margin_pct)
    if not parts["rows"] or all(r["phrase"] is None for r in parts["rows"]) and not parts["failed"]:
        out = (f"**`{w}`**: this run did not measure the socket and TCP through the same nginx with the same "
               "connection handling (PATHS needs a pair of catalogue.json's answer terms, e.g. tcp-lo and "
               "uds-lo): no answer to give.")
        return out + "".join(f" {n[0].upper()}{n[1:]}." for n in parts["controls"])
    sentences = [f"{x[0].upper()}{x[1:]}." for x in parts["failed"]]
    for handling in HANDLING:
        said = [r["phrase"] for r in parts["rows"] if r["handling"] == handling and r["phrase"]]
        if said:
            words = next(r["handling_words"] for r in parts["rows"] if r["handling"] == handling)
            sentences.append(f"{words[0].upper()}{words[1:]}, the socket " + "; it ".join(said) + ".")
    out = f"**`{w}`** (`{parts['route']}`), {parts['at']}, client median: " + " ".join(sentences)
    out += f" {parts['method']}; {parts['judged']}."
    if parts["controls"]:
        out += " " + "; ".join(n[0].upper() + n[1:] for n in parts["controls"]) + "."
    return out + parts["note"]


def projection_words(d, more):
    """How much longer a run would decide a "not sure yet" (to_decide()'s
    usable values, more), in words: in seconds of stream (INTERLEAVE) or
    rounds (ROUNDS), counting the blocks or rounds this run lost; or why
    none is said."""
    over = "blocks" if d.get("blocks") else "rounds"
    if dof_of(d) < MIN_DOF_TO_PROJECT:
        return (f"{d['rounds']} usable {over} ({dof_of(d)} degrees of freedom) are too few to say how much longer "
                f"would decide")
    length, extra = projected(d, more) if more else (None, None)
    chance = f"would decide {POWER * 10:.0f} times in 10 if the true difference is the one measured"
    if d.get("blocks"):
        if length is None or length > MOST_TO_DECIDE:
            return f"more than {MOST_TO_DECIDE // 60} minutes of stream would be needed to decide"
        return f"a stream of {length:,} s (INTERLEAVE={length}, {extra:,} s more) {chance}"
    if length is None:
        return f"more than {MOST_ROUNDS_TO_DECIDE} rounds would be needed to decide"
    return f"{length} rounds (ROUNDS={length}, {extra} more) {chance}"


def answer_parts(w, phases, settings, terms=None, unpooled=None, route=None, failed=None, margin_pct=None):
    """The answer for one workload (rate mode), in parts: one row per
    comparison of the answer (its verdict, figures and words: the report's
    answer table; phrase: the same in a sentence), the sentences of the pairs
    with no verdict because a path failed, the controls' notes, the method.
    terms: the workload's breakdown, if already computed; unpooled:
    not_pooled()'s answer; failed: failures()'s, a pair with a path past
    MAX_FAILED_SHARE getting no verdict; margin_pct: MARGIN (None: .env's default)."""
    terms = terms if terms is not None else breakdown(phases, w)
    route = route or next((p.get("endpoint") for p in phases if p["workload"] == w), None) or w
    failed = failed or {}
    margin_pct = margin_pct_setting() if margin_pct is None else margin_pct
    chosen = answer_terms(terms)
    rows = [answer_row(t, terms[t["key"]], len(chosen), margin_pct, unpooled, failed) for t in chosen]
    judged = (f"the {len(chosen)} comparisons are judged together (Holm's correction)" if len(chosen) > 1
              else "one comparison") + f", their own family at {ANSWER_ALPHA:.0%} of the report's {ALPHA:.0%}"
    method = interleaved.describe({t["key"]: terms[t["key"]] for t in chosen}) or \
        "Each interval is a 95% paired t-interval over rounds"
    return {"workload": w, "route": route, "rows": rows, "margin_pct": margin_pct,
            "at": at_words(settings),
            "failed": [x for x in (failed_phrase(t, failed) for t in chosen) if x],
            "controls": control_note(terms), "method": method, "judged": judged,
            "note": slower_pooled_note(terms, chosen, unpooled)}


def pace(settings):
    """How every phase of a rate-mode run was paced, for the report's caveat."""
    return "replayed your log" if settings.get("traffic") else "ran at the same fixed rate"


def at_words(settings):
    """How a rate-mode run sent its requests: at its rate, or replaying your log."""
    tr = settings.get("traffic")
    if tr:
        return ("replaying your log at RATE" if tr.get("speed") == "rate" else
                "replaying your log at its own times" + ("" if tr.get("speed") == 1 else f" / {tr['speed']:g}"))
    return f"at {settings['rate']} req/s" if settings.get("rate") else "at a fixed rate"


def answer_row(t, term, k, margin_pct, unpooled, failed):
    """One comparison of the answer: its verdict (differs, same, unsure, or
    none: failed, too few blocks, no interval), its figures, a short verdict in
    words (the answer table's) and a phrase (the answer's paragraph; None where
    the pair is said elsewhere or not at all)."""
    d = term["figures"]["client_p50_ms"]
    a, b = t["paths"]
    pair = f"`{b}` against `{a}`"
    row = {"handling": t["answer"], "against": t["against"], "pair": [b, a], "nginx": [nginx_of(b), nginx_of(a)],
           "handling_words": pooled_words(unpooled) if t["answer"] == "pooled" else HANDLING[t["answer"]],
           "verdict": "none", "inside_margin": None, "saved_us": None, "share": None, "lo": None, "hi": None,
           "phrase": None}
    if failed_words(t, failed):
        return {**row, "words": failed_words(t, failed), "phrase": None}
    if d is None:
        if term.get("blocks_short"):
            short = (f"fewer than {interleaved.MIN_BLOCKS} blocks in which both paths had a median (each from "
                     f"{interleaved.MIN_BLOCK_REQUESTS} or more successful requests)")
            row["phrase"] = f"was not judged against {t['against']} ({pair}): {short}"
            row["words"] = f"not judged: {short}"
        return {**row, "words": row.get("words") or "not measured"}
    row.update({"saved_us": d["mean"], "share": d.get("relative"), "lo": d.get("lo"), "hi": d.get("hi"),
                "blocks": d.get("blocks"), "rounds": d["rounds"]})
    if d["rounds"] < 2:
        return {**row, "words": "no verdict: 1 round, no interval (ROUNDS >= 2 gives one)",
                "phrase": (f"differed by {d['mean']:,.0f} µs against {t['against']} ({pair}) in its 1 round: "
                           "no interval, no verdict (ROUNDS >= 2 gives one)")}
    if not has_interval(d):
        return {**row, "words": f"no verdict: {no_interval(d)}, no interval",
                "phrase": (f"differed by {d['mean']:,.0f} µs against {t['against']} ({pair}) in each of its "
                           f"{no_interval(d)}: no interval, no verdict")}
    ci = fmt_interval(d, "µs", 0)
    v = three_way(d, margin_pct, k)
    row.update(verdict=v["verdict"], margin_us=v["margin"], inside_margin=v["inside_margin"])
    if v["verdict"] == "same":
        lo, hi = v["widened"]
        widened = f", {lo:,.0f} to {hi:,.0f} widened for the {k} comparisons" if k > 1 else ""
        row["words"] = f"no difference larger than ±{margin_pct:g}% (±{v['margin']:,.0f} µs)"
        row["phrase"] = (f"made no difference larger than ±{margin_pct:g}% ({v['margin']:,.0f} µs) against "
                         f"{t['against']} ({pair}: {ci}{widened}, inside the margin: equivalent)")
        return row
    if v["verdict"] == "unsure":
        alone = " alone" if lost_to_holm(d) or judged_together(d) else ""
        decide = projection_words(d, v["to_decide"])
        row["words"] = f"not sure yet: {decide}"
        row["taken_back"] = bool(alone)
        row["phrase"] = (f"is not told apart from {t['against']} yet ({pair}: {ci}{alone}, neither excluding 0 nor "
                         f"inside ±{margin_pct:g}%, {v['margin']:,.0f} µs): not sure yet; {decide}")
        return row
    verb = "saved" if d["mean"] > 0 else "cost"
    # Measurable and inside the margin: both are true, so both are said.
    inside = f": inside the ±{margin_pct:g}% that counts" if v["inside_margin"] else ""
    row["words"] = (f"{'faster' if d['mean'] > 0 else 'slower'} by {abs(d['mean']):,.0f} µs "
                    f"({abs(d['relative']):.0%}){inside}")
    row["phrase"] = (f"{verb} {abs(d['mean']):,.0f} µs ({abs(d['relative']):.0%} of {a}'s median) against "
                     f"{t['against']} ({pair}: {ci})"
                     + (f", inside the ±{margin_pct:g}% ({v['margin']:,.0f} µs) that counts: no difference larger "
                        "than that" if v["inside_margin"] else ""))
    return row


# Where the pooled socket measurably cost latency: what the test bed found
# behind it (docs/results.md), labelled as that, with the run's own figure to read.
SLOWER_POOLED = (" Where the pooled socket is slower at a fixed rate: on the test bed it was sleeps, not the data "
                 "path (nginx and the app each slept in epoll_wait with their core going idle about 0.3-0.5 more "
                 "times per request over the socket, and waking an idle virtual core is dear there; gone at 2,000 "
                 "req/s, reversed flat out: docs/results.md, \"why the pooled socket is slower\"); this run's app "
                 "context switches per request are in \"Where the time goes\".")


def slower_pooled_note(terms, chosen, unpooled):
    """SLOWER_POOLED where a pooled answer pair that did pool shows the socket
    measurably slower; "" otherwise."""
    for t in chosen:
        d = terms[t["key"]]["figures"]["client_p50_ms"]
        if (t["answer"] == "pooled" and not unpooled and d and d["rounds"] >= 2 and has_interval(d)
                and measurable(d) and not lost_to_holm(d) and not judged_together(d) and d["mean"] < 0):
            return SLOWER_POOLED
    return ""


def max_answer(w, phases, settings, unpooled=None, terms=None, failed=None):
    """In max mode the answer is throughput: each socket path's requests/s
    against TCP's through the same nginx, as a ratio with its interval (from
    the breakdown with flat=True, where the report judged them); a pair with
    a path past MAX_FAILED_SHARE gets failed_phrase() instead (failed:
    failures()'s): a path that fails fast carries more requests/s."""
    terms = terms if terms is not None else breakdown(phases, w, figures_for(settings), flat=True)
    failed = failed or {}
    chosen = [t for t in TERMS if t.get("answer") and (terms.get(t["key"]) or {}).get("figures", {}).get("rps")]
    ratios = [terms[t["key"]]["figures"]["rps"] for t in chosen]
    refused = [x for x in (failed_phrase(t, failed) for t in chosen) if x]
    parts = []
    for t, r in zip(chosen, ratios):
        a, b = t["paths"]
        if r is None or failed_phrase(t, failed):
            continue
        status = judge(r)
        if status == "single":
            parts.append(f"{b} carried {r['mean']:.2f}x the requests/s of {a} ({no_interval(r)}): no interval, no verdict")
        elif status == "straddles" and lost_to_holm(r):
            parts.append(f"{b} against {a}: no measurable difference once the comparisons are judged together "
                         f"({fmt_interval(r, times=True)} alone)")
        elif status == "straddles" and judged_together(r):
            parts.append(f"{b} against {a}: no measurable difference {judged_together(r)} "
                         f"({fmt_interval(r, times=True)} alone)")
        elif status == "straddles":
            parts.append(f"{b} against {a}: no measurable difference ({fmt_interval(r, times=True)})")
        else:
            parts.append(f"{b} carried {r['mean']:.2f}x the requests/s of {a} ({fmt_interval(r, times=True)})")
    if not parts and not refused:
        return (f"**`{w}`**: this run did not measure the socket and TCP through the same nginx: "
                "no answer to give.")
    judged = len([r for r in ratios if r is not None])
    out = (f"**`{w}`**, each path flat out ({generator(settings)}, {settings.get('connections')} connections): "
           + "".join(f"{x[0].upper()}{x[1:]}. " for x in refused)
           + (f"{'; '.join(parts)}. " if parts else "")
           + f"Ratios of the geometric mean, Holm's correction over {judged} comparisons, their own family at "
           f"{ANSWER_ALPHA:.0%} of the report's {ALPHA:.0%}.")
    if unpooled:
        words = pooled_words(unpooled)
        out += f" {words[0].upper()}{words[1:]}, each request opened a new connection too."
    return out


def max_answer_parts(w, phases, settings, unpooled=None, terms=None, failed=None):
    """max_answer() in parts, for the report's answer table: one row per
    comparison, the socket's requests/s as a ratio of TCP's with its
    interval and verdict (differs, none: no measurable difference, no
    interval, or a path past MAX_FAILED_SHARE: no ratio at all, the pair
    said in "failed" as make load's answer says it)."""
    terms = terms if terms is not None else breakdown(phases, w, figures_for(settings), flat=True)
    failed = failed or {}
    chosen = [t for t in TERMS if t.get("answer") and (terms.get(t["key"]) or {}).get("figures", {}).get("rps")]
    rows = []
    for t in chosen:
        r = terms[t["key"]]["figures"]["rps"]
        a, b = t["paths"]
        status = judge(r)
        row = {"handling": t["answer"], "against": t["against"], "pair": [b, a], "nginx": [nginx_of(b), nginx_of(a)],
               "handling_words": pooled_words(unpooled) if t["answer"] == "pooled" else HANDLING[t["answer"]],
               "ratio": r["mean"], "lo": r.get("lo"), "hi": r.get("hi"), "phrase": None,
               "taken_back": status == "straddles" and bool(lost_to(r))}
        if failed_words(t, failed):
            row.update(verdict="none", words=failed_words(t, failed), ratio=None, lo=None, hi=None, taken_back=False)
        elif status == "single":
            row.update(verdict="none", words=f"no verdict: {no_interval(r)}, no interval")
        elif status == "straddles":
            row.update(verdict="none", words="no measurable difference")
        else:
            row.update(verdict="differs", words=f"{'more' if r['mean'] > 1 else 'fewer'} requests/s: "
                                                f"{r['mean']:.2f}x TCP's")
        rows.append(row)
    judged = (f"Holm's correction over the {len(rows)} comparisons, their own family at {ANSWER_ALPHA:.0%} of the "
              f"report's {ALPHA:.0%}")
    return {"workload": w, "route": next((p.get("endpoint") for p in phases if p["workload"] == w), None) or w,
            "rows": rows, "max": True, "margin_pct": None,
            "failed": [x for x in (failed_phrase(t, failed) for t in chosen) if x], "controls": [], "note": "",
            "at": f"each path flat out ({generator(settings)}, {settings.get('connections')} connections)",
            "method": "Ratios of the geometric mean of paired rounds, each a 95% t-interval on the log ratios",
            "judged": judged}
