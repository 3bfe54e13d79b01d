"""report.md's "Where the time goes" (pure rendering): the breakdown's terms,
a row per term and a column per figure, each difference as report/words.py
words it, and which terms pair phases further apart than back to back."""
from report.breakdown import figures_for
from report.stats import ANSWER_ALPHA, CONFIDENCE, EXPLORE_ALPHA
from report.values import is_max
from report.words import fmt_diff


def apart_line(terms, figures):
    """The terms whose figures over rounds pair phases further apart than back
    to back (up to a round), named, since the machine's swings between the two
    phases are in those cells; nothing where every term ran in pairs."""
    over_rounds = [f for f, *_ in figures if f != "client_p50_ms"] or [f for f, *_ in figures]
    apart = [t["label"] for t in terms.values() if t.get("back_to_back") is False
             and any((t["figures"].get(f) or {}).get("blocks") is None and t["figures"].get(f) for f in over_rounds)]
    if not apart:
        return []
    return [f"Back to back in every round: the answer's pairs (each pair's two phases in a row, which first "
            f"alternating). The rounds of these terms pair phases further apart, up to a round, so the machine's "
            f"swings between the two are in their cells: {'; '.join(apart)}.", ""]


def breakdown_table(terms, settings=None):
    """Where the time goes: each term's difference, per figure, in its unit."""
    if not terms:
        return []
    # A figure no term has (the cores' split where they are not pinned) is left out.
    figures = [f for f in figures_for(settings or {}) if any(t["figures"].get(f[0]) for t in terms.values())]
    streamed = any((t["figures"].get("client_p50_ms") or {}).get("blocks") for t in terms.values())
    lines = [
        "Where the time goes: one path minus another (less two more, where a term says so); mean "
        + (f"({CONFIDENCE:.0%} interval, share of the first path's figure): the client p50's paired second by second "
           "in the interleaved stream, as the answer's, the costs' round by round (a paired t-interval over rounds). "
           if streamed else
           f"({CONFIDENCE:.0%} paired t-interval over rounds, share of the first path's figure). ")
        + "An interval that "
        "includes 0 is no measurable difference, and so is one below the resolution of the counter it was read from. "
        f"The answer's pairs' client median is judged with the answer (Holm's correction, at {ANSWER_ALPHA:.0%}); "
        "every other cell with the report's other comparisons (Benjamini-Hochberg, false discovery rate "
        f"{EXPLORE_ALPHA:.0%}): a number is a finding that survived its correction; the rest are no measurable "
        "difference."
        + (" Flat out, a path's latency is mostly its queue at the limit, not a cost: the terms are in CPU and "
           "context switches per request only." if is_max(settings or {}) else ""),
        "",
    ] + apart_line(terms, figures) + [
        "| term | paths | " + " | ".join(f"{label} ({unit})" if unit else label for _, label, _, unit in figures) + " |",
        "| --- | --- |" + " --- |" * len(figures),
    ]
    crossed = False
    for t in terms.values():
        cells = " | ".join(fmt_diff(t["figures"].get(f), unit) for f, _, _, unit in figures)
        less = f" − ({t['less'][0]} − {t['less'][1]})" if t.get("less") else ""
        mark = " †" if (t["figures"].get("client_p50_ms") or {}).get("across_streams") else ""
        crossed = crossed or bool(mark)
        lines.append(f"| {t['label']} | {t['minuend']} − {t['subtrahend']}{less}{mark} | {cells} |")
    if crossed:
        lines += ["", "† Its client p50 pairs second b of the pooled paths' stream with second b of the others', one "
                  "stream after the other: the machine's drift between the two minutes is in it, which pairing at the "
                  "same instant cancels."]
    return lines + [""]
