"""Hindsight prompt caching as an interval LP (Tail-Optimized Caching for LLM Inference, Zhang et al.), with forced caching, weights and a second tier.

Source: Tail-Optimized Caching for LLM Inference (TEL, the TEL-safe budget,
Tail-Optimized Belady and its Theorem 1); notation of
optfleet/problems/caching/belady.py.  Turn ``n`` (previous turn ``r``, the *gap*) pays

    excess_n = alpha * max(need_n - y_r, 0),   need_n = H_n + q_n - xi_tokens_n      (1)

where ``y_r`` = tokens of gap ``r`` still cached when ``n`` arrives.  Holding
``y_r`` constantly from event ``r`` to event ``next(r) - 1`` is w.l.o.g. (a
conversation's cache only shrinks inside a gap; evaluate.py), so

    min  TEL = sum_n alpha w_n need_n^+  -  sum_r alpha w_next(r) y_r                   (2)
    s.t. capacity[k]:  sum_{r <= k < next(r)} y_r <= C          for the rows k below   (3)
         0 <= y_r <= min(H_after_r, floor(need_next(r)^+))                            (4)

Why (4) is exact.  ``excess_n`` of (1) is convex piecewise linear in whole
tokens ``y``: slope ``-alpha w`` up to ``floor(need)``, then ``-alpha w
frac(need)`` for one more token, then 0.  When ``xi_tokens`` is a whole number
(the usual case) ``frac = 0`` and one column per gap carries all of it.
Otherwise gap ``r`` gets a second column ``y_part_r in [0, 1]`` (value
``alpha w frac``, same rows) when ``ceil(need) <= H_after``: at an optimum
``y_part > 0`` only if ``y`` is at its bound (it is worth less), so the LP
objective equals the true TEL of ``kept = y + y_part``.  Keeping more than
``ceil(need^+)`` never lowers TEL, which is the TEL-safe budget of the paper.

Why only one row per event where some gap ends.  Occupancy after event ``k``
is ``O_k = sum_{r <= k < next(r)} y_r``.  If no gap ends at event ``k+1``
(``k+1`` is a conversation's first turn, or its gap's column was dropped
because its bound is 0), every gap open after ``k`` is still open after
``k+1``: ``O_k <= O_{k+1}`` for every ``y >= 0`` and row ``k`` is implied by row
``k+1``.  After the last event no gap is open.  Hence rows are needed only at
``k = next(r) - 1`` for the gaps ``r`` that have a column; rows whose
columns' upper bounds sum to at most the capacity can never bind and are
dropped as well.

Blocks.  When no column covers two consecutive rows, the matrix splits there:
the LP is block diagonal (a ShareGPT-like trace of 1e5 turns, the benchmark's,
splits into 80 / 179 / 584 blocks of at most 7,871 / 2,571 / 456 rows at
capacities of 1,000 / 3,000 / 10,000 tokens).
:func:`highs_blocks` yields each block's arrays so that the highspy path
solves the blocks one by one -- the same LP, optimum the sum of the blocks'.

Integrality.  Gap ``r``'s column has a 1 in rows ``k = r .. next(r) - 1``: in
event order these are consecutive, so the constraint matrix is an interval
(consecutive-ones) matrix, totally unimodular; with whole-token bounds and
capacity every basic solution is integral.  Simplex (or IPM with crossover)
returns a vertex; :func:`kept_from_columns` checks integrality within
``1e-6`` and reports it.  IPM without crossover may return a fractional
optimum.  The LP optimum equals Tail-Optimized Belady's TEL for unit weights
and whole ``xi_tokens`` (Theorem 1); with per-turn weights or a fractional
``xi_tokens`` the greedy is not optimal and the LP is.

Forced caching (``forced=True``).  The served turn's whole history, up to the
capacity, must be in the cache right after it is served: ``F_k = min(H_after_k,
C)``.  Other gaps open at event ``k`` must fit beside it,

    forced[k]:  sum_{r < k < next(r)} y_r <= C - F_k          for every event k       (5)

and (5) replaces (3) (with ``y_k <= min(u_k, C)``, (3) at ``k`` is (5) plus
``y_k <= F_k``).  A gap trims to ``y_r`` from the next event on; holding more
until space is needed (lazy eviction) never helps in hindsight.  Columns cover
events ``r+1 .. next(r)-1``, still consecutive, right-hand sides still whole:
forced caching stays an *LP* with integral vertices -- no binaries.  Unit
token values survive too, so the furthest-next-turn exchange argument still
applies against the capacity profile ``C - F_k``: Tail-Optimized Belady's
forced variant matched this LP on every random instance tested.

Two tiers (:func:`build_two_tier`).  A fast tier of ``C1`` tokens (reuse is
free) and a slow tier of ``C2`` tokens whose reused tokens are reloaded at
``g = reload_ms_per_token`` ms each, added to TTFT.  Placement is static per
gap (``y_r`` fast and ``z_r`` slow tokens from the end of turn ``r`` to the
next turn, no migration inside a gap):

    TTFT_n = alpha (H_n + q_n - y_r - z_r) + g z_r + beta
    excess_n >= alpha (need_n - y_r) - (alpha - g) z_r,  excess_n >= 0               (6)
    fast[k]: sum_{r<=k<next(r)} y_r <= C1,  slow[k]: same with z_r <= C2               (7)
    y_r + z_r <= H_after_r,  y_r, z_r integer                                          (8)

Rows (6) and (8) break the interval structure (coefficients ``alpha`` and
``alpha - g``), so the LP relaxation can be fractional (it was on 2 of 52
random tiny instances, though never with a lower objective): the two-tier
model is a MILP.

Two build paths, one formulation: optfleet/problems/caching/lp_data.py
computes the arrays once from a trace (:class:`CacheLpData`: columns, row
ranges, bounds, values); :func:`build` turns them into a Pyomo
model with named components (``m.y``, ``m.y_part``, ``m.kept``,
``m.capacity``, ``m.tel``) for small or user-extended models, and
:func:`highs_blocks` (:func:`highs_whole`, :func:`highs_arrays`) into
column-wise CSC arrays for ``highspy.Highs.passModel`` at scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo
from numpy.typing import ArrayLike, NDArray

# Column values within this of a whole number are that number.
INTEGRALITY_TOL = 1e-6


@dataclass(frozen=True)
class CacheLpData:
    """Arrays of LP (2)-(5): columns (full pieces first, then fractional parts) and capacity rows.

    Column ``j`` keeps tokens of gap ``col_gap[j]`` (a trace row), ``0 <= x_j
    <= col_upper[j]``, saves ``col_value_ms[j]`` of TEL per token and has a 1
    in rows ``col_first_row[j] .. col_end_row[j] - 1``.  Row ``i`` is the
    capacity after event ``row_event[i]`` with right-hand side
    ``row_capacity[i]``.  ``TEL = tel_constant_ms - sum_j col_value_ms[j] x_j``.
    """

    n_turns: int
    capacity_tokens: int
    forced: bool
    n_full: int
    col_gap: NDArray[np.int64]
    col_upper: NDArray[np.int64]
    col_value_ms: NDArray[np.float64]
    col_first_row: NDArray[np.int64]
    col_end_row: NDArray[np.int64]
    row_event: NDArray[np.int64]
    row_capacity: NDArray[np.int64]
    tel_constant_ms: float

    @property
    def n_columns(self) -> int:
        return len(self.col_gap)

    @property
    def n_rows(self) -> int:
        return len(self.row_event)

    @property
    def n_nonzeros(self) -> int:
        return int(np.sum(self.col_end_row - self.col_first_row))

    def unlimited_cache_bound_ms(self) -> float:
        """TEL with every column at its upper bound: a valid lower bound (capacity ignored)."""
        return float(self.tel_constant_ms - np.dot(self.col_value_ms, self.col_upper))


def binding_rows(
    row_event: NDArray[np.int64],
    row_capacity: NDArray[np.int64],
    col_lo_event: NDArray[np.int64],
    col_hi_event: NDArray[np.int64],
    col_upper: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Rows (sorted by event) that can bind, and each column's row range ``[first, end)`` among them.

    Column ``j`` covers the rows whose event lies in ``[col_lo_event[j],
    col_hi_event[j]]`` (none when ``hi < lo``).  A row whose covering upper
    bounds sum to at most its capacity can never bind and is dropped; a
    column's rows stay consecutive after dropping, so the interval structure
    is kept.
    """
    first = np.searchsorted(row_event, col_lo_event, side="left")
    end = np.maximum(np.searchsorted(row_event, col_hi_event, side="right"), first)
    cover = np.zeros(len(row_event) + 1, dtype=np.int64)
    np.add.at(cover, first, col_upper)
    np.add.at(cover, end, -col_upper)
    binding = np.cumsum(cover[:-1]) > row_capacity
    position = np.concatenate([[0], np.cumsum(binding)])
    return row_event[binding], row_capacity[binding], position[first], position[end]


def column_rows(data: CacheLpData) -> tuple[NDArray[np.int64], NDArray[np.int32]]:
    """CSC structure of the constraint matrix: column starts (length columns + 1) and row indices (all values 1)."""
    counts = data.col_end_row - data.col_first_row
    start = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    index = np.arange(start[-1], dtype=np.int64) - np.repeat(start[:-1] - data.col_first_row, counts)
    return start, index.astype(np.int32)


def highs_arrays(data: CacheLpData) -> tuple:
    """Positional arguments of ``highspy.Highs.passModel`` for the whole LP (column-wise, minimise TEL, continuous)."""
    start, index = column_rows(data)
    return _pass_model_args(data, np.arange(data.n_columns), start, index, 0, data.n_rows, data.tel_constant_ms)


@dataclass(frozen=True)
class HighsBlock:
    """One diagonal block of the LP: its columns (indices into ``data``), row range and ``passModel`` arguments."""

    columns: NDArray[np.int64]
    first_row: int
    end_row: int
    pass_model_args: tuple


def row_blocks(data: CacheLpData) -> NDArray[np.int64]:
    """Block id of each row: rows ``i`` and ``i+1`` are in different blocks when no column covers both."""
    if data.n_rows == 0:
        return np.zeros(0, dtype=np.int64)
    spanning = data.col_end_row - data.col_first_row >= 2
    spans = np.zeros(data.n_rows + 1, dtype=np.int64)
    np.add.at(spans, data.col_first_row[spanning], 1)
    np.add.at(spans, data.col_end_row[spanning] - 1, -1)
    cut = np.cumsum(spans)[: data.n_rows - 1] == 0
    return np.concatenate([[0], np.cumsum(cut)]).astype(np.int64)


def highs_whole(data: CacheLpData) -> HighsBlock:
    """The whole LP as one block (objective offset 0, like the blocks of :func:`highs_blocks`)."""
    start, index = column_rows(data)
    columns = np.arange(data.n_columns)
    return HighsBlock(columns, 0, data.n_rows, _pass_model_args(data, columns, start, index, 0, data.n_rows, 0.0))


def highs_blocks(data: CacheLpData) -> list[HighsBlock]:
    """The LP's diagonal blocks (columns without rows are in none: they sit at their upper bound)."""
    block_of_row = row_blocks(data)
    with_rows = np.flatnonzero(data.col_end_row > data.col_first_row)
    block_of_col = block_of_row[data.col_first_row[with_rows]]
    order = with_rows[np.argsort(block_of_col, kind="stable")]
    n_blocks = int(block_of_row[-1]) + 1 if data.n_rows else 0
    col_bounds = np.searchsorted(np.sort(block_of_col), np.arange(n_blocks + 1))
    row_bounds = np.searchsorted(block_of_row, np.arange(n_blocks + 1))
    counts = data.col_end_row[order] - data.col_first_row[order]
    start = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    index = np.arange(start[-1], dtype=np.int64) - np.repeat(start[:-1] - data.col_first_row[order], counts)
    blocks = []
    for b in range(n_blocks):
        c0, c1, r0, r1 = int(col_bounds[b]), int(col_bounds[b + 1]), int(row_bounds[b]), int(row_bounds[b + 1])
        block_start = start[c0:c1 + 1] - start[c0]
        block_index = (index[start[c0]:start[c1]] - r0).astype(np.int32)
        columns = order[c0:c1]
        blocks.append(HighsBlock(columns, r0, r1, _pass_model_args(data, columns, block_start, block_index, r0, r1, 0.0)))
    return blocks


def _pass_model_args(data: CacheLpData, columns, start, index, first_row: int, end_row: int, offset_ms: float) -> tuple:
    """``passModel(num_col, num_row, num_nz, format=1 column-wise, sense=1 minimise, offset, cost, lower, upper,
    row_lower, row_upper, start, index, value, integrality)`` for ``columns`` and rows ``first_row .. end_row - 1``."""
    n_cols, n_rows = len(columns), end_row - first_row
    return (
        n_cols, n_rows, len(index), 1, 1, float(offset_ms),
        -data.col_value_ms[columns].astype(np.float64), np.zeros(n_cols), data.col_upper[columns].astype(np.float64),
        np.full(n_rows, -np.inf), data.row_capacity[first_row:end_row].astype(np.float64),
        np.asarray(start[:-1], dtype=np.int32), np.asarray(index, dtype=np.int32), np.ones(len(index)), np.zeros(n_cols, dtype=np.int32),
    )


def build(data: CacheLpData) -> pyo.ConcreteModel:
    """The Pyomo model of ``data``: ``m.y[r]``, ``m.y_part[r]``, ``m.kept[r]``, ``m.capacity[k]``, ``m.tel`` (ms)."""
    m = pyo.ConcreteModel(name="hindsight-caching")
    m.data = data
    add_keep_vars(m, data)
    add_capacity_rows(m, data)
    add_tel_objective(m, data)
    return m


def add_keep_vars(m: pyo.ConcreteModel, data: CacheLpData) -> None:
    """(4): ``m.y[r]`` whole-value tokens kept through gap ``r``, ``m.y_part[r]`` the fractional last token; ``m.kept[r]``."""
    full, part = slice(0, data.n_full), slice(data.n_full, data.n_columns)
    upper_full = dict(zip(data.col_gap[full].tolist(), data.col_upper[full].tolist(), strict=True))
    m.y = pyo.Var(sorted(upper_full), domain=pyo.NonNegativeReals, bounds=lambda _, r: (0, upper_full[r]))
    m.y_part = pyo.Var(sorted(data.col_gap[part].tolist()), domain=pyo.NonNegativeReals, bounds=(0, 1))
    gaps = sorted(set(data.col_gap.tolist()))
    m.kept = pyo.Expression(gaps, rule=lambda m, r: (m.y[r] if r in m.y else 0) + (m.y_part[r] if r in m.y_part else 0))


def _column_var(m: pyo.ConcreteModel, data: CacheLpData, j: int) -> pyo.Var:
    return (m.y if j < data.n_full else m.y_part)[int(data.col_gap[j])]


def add_capacity_rows(m: pyo.ConcreteModel, data: CacheLpData) -> None:
    """(3), or (5) when forced: ``m.capacity[k]``, cached tokens of the gaps open after event ``k`` <= right-hand side."""
    start, index = column_rows(data)
    columns_of_row: list[list[int]] = [[] for _ in range(data.n_rows)]
    for j in range(data.n_columns):
        for i in index[start[j]:start[j + 1]].tolist():
            columns_of_row[i].append(j)
    row_of_event = {int(k): i for i, k in enumerate(data.row_event.tolist())}
    m.capacity = pyo.Constraint(
        sorted(row_of_event),
        rule=lambda m, k: pyo.quicksum(_column_var(m, data, j) for j in columns_of_row[row_of_event[k]]) <= int(data.row_capacity[row_of_event[k]]),
    )


def add_tel_objective(m: pyo.ConcreteModel, data: CacheLpData) -> None:
    """(2): ``m.tel`` (ms) = TEL with nothing cached minus the TEL every kept token saves; minimised."""
    m.tel = pyo.Expression(expr=data.tel_constant_ms - pyo.quicksum(
        float(data.col_value_ms[j]) * _column_var(m, data, j) for j in range(data.n_columns)))
    m.objective = pyo.Objective(expr=m.tel, sense=pyo.minimize)


def column_values(m: pyo.ConcreteModel, data: CacheLpData) -> NDArray[np.float64]:
    """The solved model's column values in ``data``'s column order (unset variables read as 0)."""
    return np.array([_column_var(m, data, j).value or 0.0 for j in range(data.n_columns)], dtype=float)


def kept_from_columns(data: CacheLpData, values: ArrayLike) -> tuple[NDArray[np.int64], bool]:
    """``kept_tokens`` per trace row from column values, and whether every value was whole within 1e-6.

    Values are clipped to their bounds; a value within ``1e-6`` of a whole
    number is rounded to it, any other is rounded down (the matrix is
    non-negative, so rounding down keeps every capacity row satisfied).
    """
    x = np.clip(np.asarray(values, dtype=float), 0.0, data.col_upper)
    integral = bool(np.all(np.abs(x - np.round(x)) <= INTEGRALITY_TOL)) if len(x) else True
    whole = np.floor(x + INTEGRALITY_TOL).astype(np.int64)
    kept = np.zeros(data.n_turns, dtype=np.int64)
    np.add.at(kept, data.col_gap, whole)
    return kept, integral


def extract(m: pyo.ConcreteModel) -> NDArray[np.int64]:
    """``kept_tokens`` per trace row of a solved :func:`build` model (rounded as in :func:`kept_from_columns`)."""
    data: CacheLpData = m.data
    return kept_from_columns(data, column_values(m, data))[0]


def lagrangian_bound_ms(data: CacheLpData, row_price: ArrayLike) -> float:
    """A valid lower bound on TEL from any prices ``pi >= 0`` on the capacity rows.

    ``L(pi) = min_{0 <= x <= u} c0 - v.x + pi.(A x - b) = c0 - pi.b - sum_j u_j
    max(0, v_j - (A^T pi)_j)``; negative prices are clipped to 0.  At the LP
    optimum's duals it equals the LP optimum (strong duality).
    """
    pi = np.maximum(np.asarray(row_price, dtype=float), 0.0)
    prefix = np.concatenate([[0.0], np.cumsum(pi)])
    column_price = prefix[data.col_end_row] - prefix[data.col_first_row]
    return float(data.tel_constant_ms - np.dot(pi, data.row_capacity) - np.dot(data.col_upper, np.maximum(0.0, data.col_value_ms - column_price)))


# --- two tiers: (6)-(8) ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TwoTierData:
    """Arrays of MILP (6)-(8): one fast and one slow column per gap, one excess per returning turn."""

    n_turns: int
    fast_capacity_tokens: int
    slow_capacity_tokens: int
    alpha_ms_per_token: float
    reload_ms_per_token: float
    gap: NDArray[np.int64]               # trace row r of each gap with need > 0 next turn
    history_tokens: NDArray[np.int64]    # H_after_r (bound (8))
    fast_upper: NDArray[np.int64]        # min(H_after_r, ceil(need^+)): more fast tokens never help
    need_tokens: NDArray[np.float64]     # need_next(r) > 0
    weight: NDArray[np.float64]          # w_next(r)
    fast_rows: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]  # (row event, first, end) per tier
    slow_rows: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]
    tel_constant_ms: float               # excess of turns with no gap in the model (first turns)


def build_two_tier(data: TwoTierData) -> pyo.ConcreteModel:
    """MILP (6)-(8): ``m.y[r]`` fast, ``m.z[r]`` slow tokens, ``m.excess[r]`` (ms), ``m.capacity``, ``m.slow_capacity``, ``m.tel``."""
    m = pyo.ConcreteModel(name="hindsight-caching-two-tier")
    m.data = data
    gaps = data.gap.tolist()
    position = {r: i for i, r in enumerate(gaps)}
    m.y = pyo.Var(gaps, domain=pyo.NonNegativeIntegers, bounds=lambda _, r: (0, int(data.fast_upper[position[r]])))
    m.z = pyo.Var(gaps, domain=pyo.NonNegativeIntegers, bounds=lambda _, r: (0, int(data.history_tokens[position[r]])))
    m.excess = pyo.Var(gaps, domain=pyo.NonNegativeReals)
    alpha, reload = data.alpha_ms_per_token, data.reload_ms_per_token
    m.excess_def = pyo.Constraint(gaps, rule=lambda m, r: m.excess[r] >= alpha * (float(data.need_tokens[position[r]]) - m.y[r]) - (alpha - reload) * m.z[r])
    m.prefix = pyo.Constraint(gaps, rule=lambda m, r: m.y[r] + m.z[r] <= int(data.history_tokens[position[r]]))
    _add_tier_rows(m, "capacity", m.y, gaps, data.fast_rows, data.fast_capacity_tokens)
    _add_tier_rows(m, "slow_capacity", m.z, gaps, data.slow_rows, data.slow_capacity_tokens)
    m.tel = pyo.Expression(expr=data.tel_constant_ms + pyo.quicksum(float(data.weight[i]) * m.excess[r] for i, r in enumerate(gaps)))
    m.objective = pyo.Objective(expr=m.tel, sense=pyo.minimize)
    return m


def _add_tier_rows(m: pyo.ConcreteModel, name: str, var: pyo.Var, gaps: list[int], rows, capacity: int) -> None:
    """(7) for one tier: after each row's event, the tier's tokens of the open gaps <= its capacity."""
    events, first, end = rows
    members: list[list[int]] = [[] for _ in range(len(events))]
    for r, a, b in zip(gaps, first.tolist(), end.tolist(), strict=True):
        for i in range(a, b):
            members[i].append(r)
    row_of_event = {int(k): i for i, k in enumerate(events.tolist())}
    m.add_component(name, pyo.Constraint(sorted(row_of_event), rule=lambda m, k: pyo.quicksum(var[r] for r in members[row_of_event[k]]) <= capacity))


def extract_two_tier(m: pyo.ConcreteModel) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(fast_tokens, slow_tokens)`` per trace row of a solved :func:`build_two_tier` model (MIP values rounded)."""
    data: TwoTierData = m.data
    fast = np.zeros(data.n_turns, dtype=np.int64)
    slow = np.zeros(data.n_turns, dtype=np.int64)
    for r in data.gap.tolist():
        fast[r] = int(round(m.y[r].value or 0.0))
        slow[r] = int(round(m.z[r].value or 0.0))
    return fast, slow
