"""report.md's answer (pure rendering): a table per workload from its
answer_parts (report/words.py's rows), the failed pairs first, the method
in a line; and a PRECISION run's outcome."""

def precision_line(p):
    """A PRECISION run's outcome in words (load.json's "precision"), or None."""
    if not p:
        return None
    target = f"+/-{p['target_pct']:g}%"
    if not p["comparisons"]:
        return (f"Precision: PRECISION={p['target_pct']:g}% had no comparison of the answer to narrow (PATHS holds "
                f"no pair of it, or each pair has a failing path: the answer says which): {p['rounds']} rounds "
                "were run.")
    stein = (f" Stein's two-stage procedure: the first {p['first_stage_rounds']} rounds' spread set how many the run "
             "took, and the answer's intervals take their spread from them, so they keep their 95%."
             if p.get("first_stage_rounds") else "")
    if p["met"]:
        return (f"Precision: every comparison of the answer reached {target} of its first path's figure after "
                f"{p['rounds']} rounds (PRECISION; at most {p['max_rounds']}).{stein}")
    worst = max(p["comparisons"], key=lambda c: float("inf") if c["half_width"] is None else c["half_width"])
    w = "no interval" if worst["half_width"] is None else f"+/-{worst['half_width']:.1%}"
    return (f"Precision: **not met**: the target was {target}; after {p['rounds']} rounds (MAX_ROUNDS) the widest "
            f"comparison is {w} ({worst['pair']}, `{worst['workload']}`). More rounds, or a quieter machine, narrow it."
            f"{stein}")


def us(v):
    """µs, signed, without a needless decimal."""
    return f"{v:,.0f}" if abs(v) >= 10 else f"{v:,.1f}"


def answer_table(parts):
    """The answer of one workload (breakdown.answer_parts): the pairs with no
    verdict because a path failed first, then one row per comparison, the
    controls only where one failed, and the method in a line."""
    head = (f"**`{parts['workload']}`** (`{parts['route']}`), {parts['at']}, "
            f"{'requests/s' if parts.get('max') else 'client median latency'}:")
    lines = [head, ""]
    lines += [f"- {x[0].upper()}{x[1:]}." for x in parts["failed"]] + ([""] if parts["failed"] else [])
    if parts.get("max"):
        return lines + max_rows(parts)
    lines += ["| connections | the socket against | through | socket saved | 95% CI | verdict |",
              "| --- | --- | --- | ---: | --- | --- |"]
    for r in parts["rows"]:
        b, a = r["pair"]
        through = r["nginx"][0] if r["nginx"][0] == r["nginx"][1] else f"{r['nginx'][0]} / {r['nginx'][1]}"
        handling = "pooled (keepalive)" if r["handling"] == "pooled" else "new per request"
        if r["handling"] == "pooled" and not r["handling_words"].startswith("with pooled"):
            handling = "keepalive paths, not pooled here"
        # A point estimate only where it is a finding; the interval says the rest.
        saved = (f"{us(r['saved_us'])} µs ({r['share']:.0%})" if r["verdict"] == "differs" and r["share"] is not None
                 else "—")
        ci = f"{us(r['lo'])} to {us(r['hi'])} µs" if r["lo"] is not None else "—"
        if r.get("taken_back"):
            ci += " ‡"
        words = f"**{r['words']}**" if r["verdict"] in ("differs", "same") else r["words"]
        lines.append(f"| {handling} | {r['against']} (`{b}` vs `{a}`) | {through} | {saved} | {ci} | {words} |")
    lines.append("")
    failed_controls = [n.replace("**the control failed**", "**The control failed**") for n in parts["controls"]
                       if "control failed" in n]
    lines += [f"{n}." for n in failed_controls] + ([""] if failed_controls else [])
    if any(r.get("taken_back") for r in parts["rows"]):
        lines += ["‡ Its own interval excludes 0, but not once judged with the other comparisons: not sure yet.", ""]
    if parts["note"]:
        lines += [parts["note"].strip(), ""]
    lines += [f"Method: {parts['method'][0].lower()}{parts['method'][1:]}; {parts['judged']}; \"no difference\" "
              f"means that interval, widened for the comparisons judged together, lies within ±"
              f"{parts['margin_pct']:g}% of TCP's median (MARGIN). [How to read this](#how-to-read-this).", ""]
    return lines


def max_rows(parts):
    """max mode's answer table: the socket's requests/s as a ratio of TCP's."""
    lines = ["| connections | the socket against | through | socket's requests/s | 95% CI | verdict |",
             "| --- | --- | --- | ---: | --- | --- |"]
    for r in parts["rows"]:
        b, a = r["pair"]
        through = r["nginx"][0] if r["nginx"][0] == r["nginx"][1] else f"{r['nginx'][0]} / {r['nginx'][1]}"
        handling = "pooled (keepalive)" if r["handling"] == "pooled" else "new per request"
        ratio = f"{r['ratio']:.2f}x TCP's" if r["verdict"] == "differs" else "—"
        ci = f"{r['lo']:.2f}-{r['hi']:.2f}x" + (" ‡" if r.get("taken_back") else "") if r["lo"] is not None else "—"
        words = f"**{r['words']}**" if r["verdict"] == "differs" else r["words"]
        lines.append(f"| {handling} | {r['against']} (`{b}` vs `{a}`) | {through} | {ratio} | {ci} | {words} |")
    lines.append("")
    if any(r.get("taken_back") for r in parts["rows"]):
        lines += ["‡ Its own interval excludes 1, but not once judged with the other comparisons.", ""]
    return lines + [f"Method: {parts['method'][0].lower()}{parts['method'][1:]}; {parts['judged']}. "
                    "[How to read this](#how-to-read-this).", ""]
