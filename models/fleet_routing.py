"""The fleet MILP's routing modes (``ROUTING``): the rows each adds to models/fleet.py's model, swapped by name.

``split``: any shares; the model's rows (1)-(8) alone.

``threshold``: each length segment's uncompressed share goes to one pool, pools
in window order along L, each pool's compressed classes a prefix of its band at ``p_c``:
    (9a) assign[s,j] binary:  one_pool[s]: sum_j assign[s,j] = 1;  x_assign[k,j]: x[k,j] <= assign[s(k),j]
    (9b) contiguous[i]        sum_j j assign[s_i,j] <= sum_j j assign[s_(i+1),j]   (segments in order)
    (9c) compress[s,j] binary: the objective's rows tie z to it (models/fleet_objectives.py);
         compress_open[s,j]: compress[s,j] <= open[j];  band_prefix[s,j]: compress[s,j] >= compress[s+1,j]

``sweep``: the sweep's policy space: threshold, and
    (10a) one_short           at most one pool other than the long one opens
    (10b) smallest_open[s,j]  assign[s,j] + sum_{j' < j holding s} open[j'] <= 1   (a segment goes to the
                              smallest open pool that holds it)
    (10c) short_home[s,j]     assign[s,j] = open[j] for every pool but the long one
    (10d) gamma_grid[s,j]     compress[s,j] = compress[s+1,j] unless segment s ends on the gamma grid of j

Each mode also says which of its variables a closed pool has at 0 and by which
rows (``closed_variables``, ``closing_rows``: the case-by-case solve of
optfleet/problems/fleet/milp.py) and how a plan's routing starts its variables
(``start``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyomo.environ as pyo
from optfleet.models.fleet_objectives import OBJECTIVES
from optfleet.models.linear import scaled, total


@dataclass(frozen=True)
class RoutingMode:
    """One routing mode: its rows, its variables of a closed pool j and the rows that close them, its MIP start."""

    add_rows: Callable[[pyo.ConcreteModel], None]
    closed_variables: Callable[[pyo.ConcreteModel, int], list]
    closing_rows: Callable[[pyo.ConcreteModel], list]
    start: Callable[[pyo.ConcreteModel, int, int, int | None], None]


def add_threshold_rows(m: pyo.ConcreteModel) -> None:
    """(9a)-(9c): contiguous one-pool-per-segment routing; compression as a band prefix."""
    data = m.data
    fit_pairs = m.share_index.fit
    pools = range(len(data.pools))
    segments = sorted(set(data.class_segment.tolist()))
    seg_fits = {(s, j) for k, j in fit_pairs for s in [int(data.class_segment[k])]}
    m.assign = pyo.Var(sorted(seg_fits), domain=pyo.Binary)
    pools_of = {s: [j for j in pools if (s, j) in seg_fits] for s in segments}
    m.one_pool = pyo.Constraint(segments, rule=lambda m, s: total([m.assign[s, j] for j in pools_of[s]]) == 1)
    m.x_assign = pyo.Constraint(fit_pairs, rule=lambda m, k, j: m.x[k, j] <= m.assign[int(data.class_segment[k]), j])
    order = {s: scaled([(float(j), m.assign[s, j]) for j in pools_of[s]]) for s in segments}
    m.contiguous = pyo.Constraint(range(len(segments) - 1), rule=lambda m, i: order[segments[i]] <= order[segments[i + 1]])
    comp_segments = sorted({(int(data.class_segment[k]), j) for k, j in m.share_index.compressed})
    m.compress = pyo.Var(comp_segments, domain=pyo.Binary)
    OBJECTIVES[m.objective_name].compress_link_rows(m)
    m.compress_open = pyo.Constraint(comp_segments, rule=lambda m, s, j: m.compress[s, j] <= m.open[j])
    m.band_prefix = pyo.Constraint(_band_pairs(m), rule=lambda m, s, j: m.compress[s, j] >= m.compress[s + 1, j])


def _band_pairs(m: pyo.ConcreteModel) -> list[tuple[int, int]]:
    """``(s, j)`` of the compressed segments whose next segment pool j can also compress (rows (9c), (10d))."""
    return [(s, j) for s, j in m.compress.keys() if (s + 1, j) in m.compress]


def add_sweep_space_rows(m: pyo.ConcreteModel) -> None:
    """(9a)-(9c) and (10a)-(10d): the sweep's policy space."""
    add_threshold_rows(m)
    data = m.data
    pools = range(len(data.pools))
    long = data.long_index
    seg_fits = sorted(m.assign.keys())
    m.one_short = pyo.Constraint(expr=sum(m.open[j] for j in pools if j != long) <= 1)
    # A segment goes to the smallest open pool holding it: with at most one short pool open, one row per
    # (segment, pool) covers every smaller pool at once (a clique row, tighter than one row per pair).
    smaller = {(s, j): [jj for jj in pools if jj < j and (s, jj) in m.assign] for (s, j) in seg_fits}
    m.smallest_open = pyo.Constraint(
        [key for key in seg_fits if smaller[key]], rule=lambda m, s, j: m.assign[s, j] + total([m.open[jj] for jj in smaller[s, j]]) <= 1
    )
    # ... so an open short pool is that pool for every segment it holds and the open binaries decide the
    # assignment (one-off measurement: Azure K = 2 from 3.3 s to 0.7 s with the build; LMSYS unchanged).
    m.short_home = pyo.Constraint([(s, j) for s, j in seg_fits if j != long], rule=lambda m, s, j: m.assign[s, j] == m.open[j])
    segment_top = {int(seg): float(top) for seg, top in zip(data.class_segment, data.class_total_to, strict=True)}
    off_grid = [
        (s, j) for s, j in _band_pairs(m)
        if not any(abs(segment_top[s] - g * data.pools[j].window_tokens) < 1e-6 for g in data.problem.gammas)
    ]
    m.gamma_grid = pyo.Constraint(off_grid, rule=lambda m, s, j: m.compress[s, j] == m.compress[s + 1, j])


def _threshold_closed_variables(m: pyo.ConcreteModel, j: int) -> list:
    """``compress[., j]`` (row ``compress_open``) and, when ``p_c < 1``, ``assign[., j]``: every class then needs
    an uncompressed share, ``x[k, j] <= assign[s, j]`` and ``x[k, j] <= open[j]``, so a segment's pool is open."""
    variables = [var for (_, jj), var in m.compress.items() if jj == j]
    if m.data.problem.compressible_fraction < 1:
        variables += [var for (_, jj), var in m.assign.items() if jj == j]
    return variables


def _threshold_closing_rows(m: pyo.ConcreteModel) -> list:
    return [m.compress_open, m.x_assign, m.one_pool, m.route, m.compress_share]


def _threshold_start(m: pyo.ConcreteModel, k: int, home: int, compressed_into: int | None) -> None:
    """Class k's segment goes to ``home``; its band is compressed into ``compressed_into`` (if any)."""
    segment = int(m.data.class_segment[k])
    m.assign[segment, home].set_value(1)
    if compressed_into is not None:
        m.compress[segment, compressed_into].set_value(1)


THRESHOLD = RoutingMode(add_threshold_rows, _threshold_closed_variables, _threshold_closing_rows, _threshold_start)
ROUTING: dict[str, RoutingMode] = {
    "split": RoutingMode(add_rows=lambda m: None, closed_variables=lambda m, j: [], closing_rows=lambda m: [],
                         start=lambda m, k, home, compressed_into: None),
    "threshold": THRESHOLD,
    "sweep": RoutingMode(add_sweep_space_rows, _threshold_closed_variables, _threshold_closing_rows, _threshold_start),
}
