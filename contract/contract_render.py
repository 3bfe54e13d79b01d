"""make contract's printout: the required and the optional clauses, what
the missing ones cost, the socket pitfalls, and the verdict."""


def render(image, clauses):
    """The two tables, what the missing optional clauses cost, and the verdict."""
    pits = [c for c in clauses if c.get("pitfall")]
    clauses = [c for c in clauses if not c.get("pitfall")]
    req = [c for c in clauses if c["required"]]
    opt = [c for c in clauses if not c["required"]]
    width = max(len(c["clause"]) for c in clauses)
    lines = [f"Contract check of {image}"]

    def table(title, rows, fail):
        if rows:
            lines.extend(["", title])
            for c in rows:
                lines.append(f"  {'pass' if c['pass'] else fail:<7}  {c['clause']:<{width}}  {c['why']}")

    table("Required (the lab cannot run without these):", req, "FAIL")
    table("Optional (what an app may leave out):", opt, "missing")
    missing = [c for c in opt if not c["pass"]]
    # A panel several missing metrics feed is listed once, with each of them.
    panels = {}
    for c in missing:
        for p in c.get("panels") or []:
            panels.setdefault(p, []).append(f"{c['clause']}: {c['why']}")
    if panels:
        lines += ["", "Panels left empty:"]
        lines += [f"  {p}  ({'; '.join(why)})" for p, why in panels.items()]
    workloads = sorted(c["workload"] for c in missing if c.get("workload"))
    if workloads:
        lines += ["", "Workloads (SCENARIO=) this image cannot run: " + ", ".join(workloads)]
    other = [c for c in missing if not c.get("panels") and not c.get("workload") and c.get("effect")]
    if other:
        lines += ["", "Also missing:"]
        lines += [f"  {c['clause']}: {c['effect']}" for c in other]
    if pits:
        lines += ["", "Socket pitfalls (what production meets over the socket; none is required):"]
        for c in pits:
            lines.append(f"  {c.get('status', 'pass' if c['pass'] else 'WARN'):<7}  {c['clause']}")
            lines.append(f"           {c['why']}")
            if c.get("fix"):
                lines.append(f"           fix: {c['fix']}")
        counts = {}
        for c in pits:
            counts[c.get("status", "")] = counts.get(c.get("status", ""), 0) + 1
        lines.append("Pitfalls: " + ", ".join(f"{n} {st}" for st, n in sorted(counts.items())) + ".")
    ok = all(c["pass"] for c in req)
    lines += ["", f"Required: {sum(c['pass'] for c in req)} of {len(req)} pass. "
              f"Optional: {sum(c['pass'] for c in opt)} of {len(opt)} pass.",
              f"{image} {'keeps' if ok else 'breaks'} the contract."]
    return "\n".join(lines), ok
