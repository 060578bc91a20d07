"""A plan's routing rules as a planner reads them: cut points when they are a threshold rule, else a compact table.

A solver's plan carries one rule per length class (plan.py): an ``L_total`` range within an ``L_out`` band.
Consecutive classes of a band with the same shares are merged first.  When every class goes whole and
uncompressed to one pool and the pools' classes do not interleave in ``L_total`` (each pool's end at or below
the next larger pool's start), the rules *are* threshold routing and print as cut points
(``L_total <= 2,611 -> w8192``); otherwise as a table of ranges x pools with the share each pool serves (``c``
marks a compressed share).
"""

from __future__ import annotations

from dataclasses import dataclass

from optfleet.problems.fleet.plan import Plan, RouteRule
from optfleet.tables import KEY, Column, Table

SHARE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class RouteRange:
    """Requests with ``total_above < L_total <= total_to`` and ``out_from <= L_out < out_below``, one set of shares."""

    total_above: int
    total_to: int
    out_from: int
    out_below: int | None
    shares: tuple[tuple[str, float], ...]
    compressed: tuple[tuple[str, float], ...]

    def compress_and_route(self) -> tuple[str, float, str] | None:
        """``(compressed pool, its share, the other pool)`` when the range is split only between a compressed share
        to one pool and the rest uncompressed to another (Compress-and-Route), else None."""
        compressed = [(n, v) for n, v in self.compressed if v > SHARE_TOLERANCE]
        plain = [(n, v) for n, v in self.shares if v > SHARE_TOLERANCE]
        if len(compressed) == 1 and len(plain) == 1 and compressed[0][0] != plain[0][0]:
            return compressed[0][0], compressed[0][1], plain[0][0]
        return None

    def single_pool(self) -> str | None:
        """The pool serving the whole range uncompressed, if one does."""
        whole = [name for name, share in self.shares if share >= 1.0 - SHARE_TOLERANCE]
        return whole[0] if whole and not any(s > SHARE_TOLERANCE for _, s in self.compressed) else None


def _key(rule: RouteRule) -> tuple:
    def rounded(pairs):
        return tuple(sorted((name, round(share, 9)) for name, share in pairs if share > SHARE_TOLERANCE))

    return rule.out_from, rule.out_below, rounded(rule.shares), rounded(rule.compressed)


def merged_ranges(plan: Plan) -> list[RouteRange]:
    """The plan's rules, ordered by ``L_out`` band then ``L_total``, with touching classes of equal shares merged."""
    ranges: list[RouteRange] = []
    for rule in sorted(plan.rules or (), key=lambda r: (r.out_from, r.total_above)):
        out_from, out_below, shares, compressed = _key(rule)
        last = ranges[-1] if ranges else None
        if last is not None and (last.out_from, last.out_below, last.shares, last.compressed) == (out_from, out_below, shares, compressed) \
                and last.total_to == rule.total_above:
            ranges[-1] = RouteRange(last.total_above, rule.total_to, out_from, out_below, shares, compressed)
        else:
            ranges.append(RouteRange(rule.total_above, rule.total_to, out_from, out_below, shares, compressed))
    return ranges


def threshold_cuts(plan: Plan) -> list[tuple[int, str]] | None:
    """``[(cut, pool), ...]`` (``L_total <= cut`` goes to ``pool``, above the previous cut) when the rules are
    threshold routing, else None: every class outside the Compress-and-Route ranges (:func:`compressed_ranges`)
    goes whole and uncompressed to one pool, whatever its ``L_out`` band, and every class of a pool ends at or
    below where every class of the next larger pool begins."""
    ranges = [r for r in merged_ranges(plan) if r.compress_and_route() is None]
    pools = [r.single_pool() for r in ranges]
    if not ranges or any(p is None for p in pools):
        return None
    order = [p.name for p in plan.pools]
    used = sorted(set(pools), key=order.index)
    ends = {name: max(r.total_to for r, p in zip(ranges, pools, strict=True) if p == name) for name in used}
    starts = {name: min(r.total_above for r, p in zip(ranges, pools, strict=True) if p == name) for name in used}
    if any(ends[a] > starts[b] for a, b in zip(used, used[1:])):
        return None
    return [(ends[name], name) for name in used]


def compressed_ranges(plan: Plan) -> list[RouteRange]:
    """The ranges split between a compressed share to one pool and the rest to another (Compress-and-Route)."""
    return [r for r in merged_ranges(plan) if r.compress_and_route() is not None]


def routing_blocks(plan: Plan) -> list[str | Table]:
    """The plan's routing for a report: one line of cut points, or a table of ranges x pools (module docstring)."""
    cuts = threshold_cuts(plan)
    if cuts is not None:
        shown = [f"L_total <= {cut:,} -> {pool}" for cut, pool in cuts[:-1]] + [f"above -> {cuts[-1][1]}"]
        lines: list[str | Table] = ["routing (threshold): " + "; ".join(shown)]
        for r in compressed_ranges(plan):
            pool, share, other = r.compress_and_route()
            lines.append(f"  Compress-and-Route: L_total {r.total_above + 1:,}-{r.total_to:,} (L_out {r.out_from:,}"
                         f"{'+' if r.out_below is None else f'-{r.out_below - 1:,}'}): {100 * share:.0f} % compressed into {pool} "
                         f"(to its window minus L_out), the rest -> {other}")
        return lines
    names = [p.name for p in plan.pools]
    rows = []
    for r in merged_ranges(plan):
        shares, compressed = dict(r.shares), dict(r.compressed)
        row = {"L_total": f"{r.total_above + 1:,}-{r.total_to:,}",
               "L_out": f"{r.out_from:,}+" if r.out_below is None else f"{r.out_from:,}-{r.out_below - 1:,}"}
        for name in names:
            parts = [f"{100 * shares[name]:.0f} %"] if name in shares else []
            parts += [f"{100 * compressed[name]:.0f} %c"] if name in compressed else []
            row[name] = " + ".join(parts) or None
        rows.append(row)
    columns = [Column("L_total", "L_total tokens", keep=KEY), Column("L_out", "L_out tokens", keep=KEY),
               *(Column(name, name, keep=KEY) for name in names)]
    return [f"routing (split, {len(rows)} ranges; share of each range per pool, c = compressed):", Table(columns, rows)]
