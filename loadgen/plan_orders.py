"""The paths' order in a run: rounds counterbalanced (Williams rows, or
the comparisons' pairs back to back in alternating order), and make load's
interleaved streams, one per connection handling."""
import random

# make load's interleaved stream: its pseudo-path in phase names (<workload>__mix__r1).
MIX = "mix"


def williams(n):
    """The rows of a balanced Latin square of n symbols (Williams, 1949): each
    symbol once in every position and, over the rows, right after each other
    symbol once (n rows for an even n; 2n, the rows and their mirrors, for odd)."""
    first, lo, hi = [0], 1, n - 1
    for i in range(1, n):
        if i % 2:
            first.append(lo)
            lo += 1
        else:
            first.append(hi)
            hi -= 1
    rows = [[(x + r) % n for x in first] for r in range(n)]
    return rows + [row[::-1] for row in rows] if n % 2 and n > 1 else rows


def orders(paths, rounds, seed):
    """The order of the paths in each round 1..rounds: Williams rows, with the
    paths assigned to its symbols and the rows' order drawn from seed; after
    every full set of rows, the rows are drawn again."""
    rng = random.Random(seed)
    names = list(paths)
    rng.shuffle(names)
    rows = williams(len(names))
    out = []
    while len(out) < rounds:
        batch = rows[:]
        rng.shuffle(batch)
        out += [[names[i] for i in row] for row in batch]
    return out[:rounds]


def pair_units(paths, catalogue):
    """The paths as a round runs them: the pairs a comparison is made of,
    back to back (the answer's pairs first, then the direct pair and the
    other terms of catalogue.json's breakdown, each path in one pair at most),
    the paths left over alone."""
    terms = catalogue["breakdown"]["terms"]
    ranked = [t["paths"] for t in terms if t.get("answer")] + [(catalogue.get("direct") or {}).get("pair") or []]
    ranked += [t["paths"] for t in terms if not t.get("answer")]
    left, units = list(paths), []
    for pair in ranked:
        if len(pair) == 2 and all(p in left for p in pair):
            units.append(list(pair))
            left = [p for p in left if p not in pair]
    return units + [[p] for p in left]


def paired_orders(units, rounds, seed):
    """The order of the paths in each round 1..rounds: the units (pair_units)
    in an order drawn anew each round, each pair's two paths back to back,
    which one first alternating from round to round (drawn for the first), so
    that over every two rounds each path of a pair runs first once and a
    pair's comparison never spans more than its own two phases. A round's
    draws do not depend on how many rounds follow: a later batch continues
    the same sequence."""
    rng = random.Random(seed)
    flip = [rng.random() < 0.5 for _ in units]
    out = []
    for r in range(1, rounds + 1):
        idx = list(range(len(units)))
        rng.shuffle(idx)
        out.append([p for i in idx for p in (units[i][::-1] if flip[i] ^ (r % 2 == 0) else units[i])])
    return out


def streams(s):
    """The interleaved streams of a workload: (kind, paths), one per connection
    handling in PATHS, the pooled paths' first. A pooled comparison never
    shares its stream with requests that each open a new upstream connection
    (their TIME_WAIT, connection tracking and softirq on the same cores moved
    the pooled answer's sign); the pooled stream runs before the other leaves
    its TIME_WAIT behind. One kind alone: one stream, kind None."""
    pooled = [p for p in s["paths"] if p in (s.get("pooled") or [])]
    new = [p for p in s["paths"] if p not in pooled]
    if not pooled or not new:
        return [(None, list(s["paths"]))]
    return [("pooled", pooled), ("new", new)]
