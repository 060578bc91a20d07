"""Reserved-capacity models (kind ``reserved``): how many units to buy, and what spills to pay-as-you-go.

Notation (optfleet/problems/reserved/windows.py): window ``n`` of ``Delta`` seconds holds ``D_n`` adjusted tokens;
one unit serves ``a = tau Delta`` of them per window; spilling ``o_n`` of them costs ``p_n o_n``; ``H`` hours is
the windows' span; a unit costs ``c`` $ per hour.  Purchases lie on the grid ``G in {0, m, m + s, m + 2s, ...}``
(minimum ``m``, step ``s``): ``G = m y + s k`` with ``y`` binary and ``k`` integer, ``k <= K y``.

* **hybrid** (:func:`build_hybrid`): ``min c G + (1/H) sum_n p_n o_n`` s.t. ``o_n >= D_n - a G``, ``o_n >= 0``.
  Every window's tokens beyond the units spill, none waits: slosizer's hybrid rule, so the optimum equals
  the exhaustive scan's over the same grid.
* **backlog** (:func:`build_backlog`): work may wait; ``q_n`` is the backlog at the end of window ``n``:
  ``q_n >= q_{n-1} + D_n - a G - o_n``, ``0 <= q_n <= tau W G`` (what is queued drains within ``W`` seconds),
  ``0 <= o_n <= D_n`` (a window spills from its own arrivals, at its own price).  A ``q_n`` above the true
  backlog ``max(0, ...)`` only tightens the cap, so the LP's optimum is the true one.
* **chance** (:func:`build_chance`): ``min G`` s.t., at every window width, ``a G + D_n z_n >= D_n`` and
  ``sum_n z_n <= floor(eps N)`` with ``z_n`` binary (window ``n`` may overload): ``P(X_n > G) <= eps``.
  Binaries are made only for the ``floor(eps N) + 1`` busiest windows; every other window is held by one row
  ``a G >= D`` of the busiest among them (a plan overloading a window outside the busiest ``k + 1`` keeps one of
  those ``k + 1`` below ``G``, which is then above every window outside them, so fixing ``z = 0`` there loses
  nothing).
* **robust** (:func:`build_robust`): one ``G`` for scenarios ``s``: ``min t`` s.t.
  ``t >= c G + (1/H_s) sum_n p_sn o_sn`` and the hybrid rows per scenario, optionally the chance rows per
  scenario.
* **commitment** (:func:`build_commitment`): a reservation ``R`` (integer units, whole horizon, ``c``/h),
  deployments ``G_mb`` per model ``m`` and block ``b`` on model ``m``'s grid, on-demand units ``u_b`` beyond the
  reservation, bought in lots ``v_b`` that last ``T`` blocks (``u_b = sum_{b-T < b' <= b} v_b'``) at ``c_od``/h:
  ``min (1/H) [c R H + c_od h_blk T sum_b v_b + sum_mn p_mn o_mn]`` s.t. ``sum_m G_mb <= R + u_b``,
  ``o_mn >= D_mn - a_m G_m,b(n)``.  A lot bought near the end is paid for its whole term.

Pyomo models for traces up to :data:`PYOMO_WINDOW_LIMIT` windows; beyond it the hybrid and backlog models are
built as arrays (:func:`hybrid_arrays`, :func:`backlog_arrays`), the same rows column-wise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo
from numpy.typing import NDArray
from scipy.sparse import coo_matrix

from optfleet.models.linear import scaled, total

PYOMO_WINDOW_LIMIT = 20_000  # windows above which the hybrid and backlog models are built as arrays


@dataclass(frozen=True)
class PurchaseGrid:
    """``{0, m, m + s, ...}`` up to ``max_units``."""

    min_units: int
    increment_units: int
    max_units: int

    @property
    def max_steps(self) -> int:
        """``K``: the most steps of ``s`` above ``m`` within ``max_units``."""
        return max(0, (self.max_units - self.min_units) // self.increment_units)


@dataclass(frozen=True)
class SpillWindows:
    """One trace's windows as the models see them: ``a = tau Delta``, ``D_n``, ``p_n``, ``H``."""

    work_per_unit: float
    work: NDArray[np.float64]
    price_per_work: NDArray[np.float64]
    hours: float


@dataclass(frozen=True)
class OverloadLimit:
    """``P(X_n > G) <= eps`` at one window width: ``a``, ``D_n`` and ``floor(eps N)``."""

    work_per_unit: float
    work: NDArray[np.float64]
    allowed: int


# ---------------------------------------------------------------- families shared by every model


def add_units(m: pyo.Block, grid: PurchaseGrid, name: str = "") -> pyo.Expression:
    """``G = m y + s k``, ``k <= K y`` (module docstring): the block's ``buy{name}``, ``steps{name}`` and the
    expression ``units{name}``."""
    buy = pyo.Var(domain=pyo.Binary)
    steps = pyo.Var(domain=pyo.NonNegativeIntegers, bounds=(0, grid.max_steps))
    m.add_component(f"buy{name}", buy)
    m.add_component(f"steps{name}", steps)
    m.add_component(f"steps_need_buy{name}", pyo.Constraint(expr=steps <= grid.max_steps * buy))
    units = pyo.Expression(expr=grid.min_units * buy + grid.increment_units * steps)
    m.add_component(f"units{name}", units)
    return units


def add_spill(m: pyo.Block, windows: SpillWindows, capacity: pyo.Expression, name: str = "") -> list[int]:
    """``o_n >= D_n - a G`` over the windows with work (an empty window spills nothing); returns them."""
    busy = np.flatnonzero(windows.work > 0).tolist()
    spill = pyo.Var(busy, domain=pyo.NonNegativeReals)
    m.add_component(f"spill{name}", spill)
    work = windows.work.tolist()
    m.add_component(f"spill_beyond_units{name}", pyo.Constraint(busy, rule=lambda _, n: spill[n] + windows.work_per_unit * capacity >= work[n]))
    return busy


def spill_cost_per_hour(m: pyo.Block, windows: SpillWindows, busy: list[int], name: str = ""):
    """``(1/H) sum_n p_n o_n``."""
    spill = m.component(f"spill{name}")
    price = windows.price_per_work
    return scaled([(float(price[n]) / windows.hours, spill[n]) for n in busy if price[n] > 0])


def add_overload_limit(m: pyo.Block, limit: OverloadLimit, units: pyo.Expression, name: str) -> None:
    """``P(X_n > G) <= eps`` with binaries on the busiest ``floor(eps N) + 1`` windows (module docstring)."""
    order = np.argsort(-limit.work, kind="stable")
    candidates = order[: limit.allowed + 1].tolist()
    rest = order[limit.allowed + 1:]
    overload = pyo.Var(candidates, domain=pyo.Binary)
    m.add_component(f"overload{name}", overload)
    work = limit.work.tolist()
    m.add_component(f"overload_or_cover{name}", pyo.Constraint(
        candidates, rule=lambda _, n: limit.work_per_unit * units + work[n] * overload[n] >= work[n]))
    m.add_component(f"overload_count{name}", pyo.Constraint(expr=total([overload[n] for n in candidates]) <= limit.allowed))
    if len(rest):
        m.add_component(f"cover_rest{name}", pyo.Constraint(expr=limit.work_per_unit * units >= float(limit.work[rest[0]])))


# ---------------------------------------------------------------- the models


def build_hybrid(windows: SpillWindows, grid: PurchaseGrid, unit_per_hour: float) -> pyo.ConcreteModel:
    m = pyo.ConcreteModel(name="reserved_hybrid")
    units = add_units(m, grid)
    busy = add_spill(m, windows, units)
    m.cost = pyo.Objective(expr=unit_per_hour * units + spill_cost_per_hour(m, windows, busy), sense=pyo.minimize)
    return m


def build_backlog(windows: SpillWindows, grid: PurchaseGrid, unit_per_hour: float, tau: float, max_wait_s: float) -> pyo.ConcreteModel:
    m = pyo.ConcreteModel(name="reserved_backlog")
    units = add_units(m, grid)
    n_windows = len(windows.work)
    busy = np.flatnonzero(windows.work > 0).tolist()
    work = windows.work.tolist()
    m.spill = pyo.Var(busy, domain=pyo.NonNegativeReals, bounds=lambda _, n: (0.0, work[n]))
    m.backlog = pyo.Var(range(n_windows), domain=pyo.NonNegativeReals)
    busy_set = set(busy)

    def carried(_, n):
        previous = m.backlog[n - 1] if n else 0.0
        spilled = m.spill[n] if n in busy_set else 0.0
        return m.backlog[n] - previous + spilled + windows.work_per_unit * units >= work[n]

    m.carried = pyo.Constraint(range(n_windows), rule=carried)
    m.wait_limit = pyo.Constraint(range(n_windows), rule=lambda _, n: m.backlog[n] <= tau * max_wait_s * units)
    m.cost = pyo.Objective(expr=unit_per_hour * units + spill_cost_per_hour(m, windows, busy), sense=pyo.minimize)
    return m


def build_chance(limits: list[OverloadLimit], grid: PurchaseGrid) -> pyo.ConcreteModel:
    m = pyo.ConcreteModel(name="reserved_chance")
    units = add_units(m, grid)
    for i, limit in enumerate(limits):
        add_overload_limit(m, limit, units, f"_{i}")
    m.units_bought = pyo.Objective(expr=units, sense=pyo.minimize)
    return m


def build_robust(scenarios: list[SpillWindows], grid: PurchaseGrid, unit_per_hour: float,
                 limits: list[list[OverloadLimit]] | None = None) -> pyo.ConcreteModel:
    m = pyo.ConcreteModel(name="reserved_robust")
    units = add_units(m, grid)
    m.worst_cost = pyo.Var(domain=pyo.NonNegativeReals)
    m.scenario = pyo.Block(range(len(scenarios)))
    for s, windows in enumerate(scenarios):
        block = m.scenario[s]
        busy = add_spill(block, windows, units)
        block.cost_at_most_worst = pyo.Constraint(expr=m.worst_cost >= unit_per_hour * units + spill_cost_per_hour(block, windows, busy))
        for i, limit in enumerate((limits or [[]] * len(scenarios))[s]):
            add_overload_limit(block, limit, units, f"_{i}")
    m.cost = pyo.Objective(expr=m.worst_cost, sense=pyo.minimize)
    return m


@dataclass(frozen=True)
class CommitmentData:
    """The commitment model's numbers (module docstring): per model its grid and windows; ``block_of_window`` maps
    window ``n`` to its block; lots last ``term_blocks`` blocks of ``block_hours``."""

    grids: list[PurchaseGrid]
    windows: list[SpillWindows]
    block_of_window: NDArray[np.int64]
    n_blocks: int
    block_hours: float
    reservation_per_hour: float
    on_demand_per_hour: float
    term_blocks: int
    max_reservation_units: int


def build_commitment(data: CommitmentData) -> pyo.ConcreteModel:
    m = pyo.ConcreteModel(name="reserved_commitment")
    blocks = range(data.n_blocks)
    hours = data.windows[0].hours
    m.reservation = pyo.Var(domain=pyo.NonNegativeIntegers, bounds=(0, data.max_reservation_units))
    m.lots = pyo.Var(blocks, domain=pyo.NonNegativeIntegers, bounds=(0, data.max_reservation_units))
    m.model = pyo.Block(range(len(data.windows)))
    deployed = {}
    spill_terms = []
    for i, (grid, windows) in enumerate(zip(data.grids, data.windows, strict=True)):
        block = m.model[i]
        for b in blocks:
            deployed[i, b] = add_units(block, grid, f"_{b}")
        busy = np.flatnonzero(windows.work > 0).tolist()
        block.spill = pyo.Var(busy, domain=pyo.NonNegativeReals)
        work = windows.work.tolist()
        of = data.block_of_window.tolist()
        block.spill_beyond_units = pyo.Constraint(busy, rule=lambda blk, n, i=i, windows=windows, work=work, of=of:
                                                  blk.spill[n] + windows.work_per_unit * deployed[i, of[n]] >= work[n])
        spill_terms.append(spill_cost_per_hour(block, windows, busy))

    def covered(_, b):
        on_demand = total([m.lots[k] for k in range(max(0, b - data.term_blocks + 1), b + 1)])
        return sum(deployed[i, b] for i in range(len(data.windows))) <= m.reservation + on_demand

    m.deployed_within_units = pyo.Constraint(blocks, rule=covered)
    lot_cost = data.on_demand_per_hour * data.block_hours * data.term_blocks / hours
    m.cost = pyo.Objective(expr=data.reservation_per_hour * m.reservation + lot_cost * total([m.lots[b] for b in blocks]) + sum(spill_terms),
                           sense=pyo.minimize)
    return m


def units_bought(m: pyo.Block, name: str = "") -> int:
    """The incumbent's ``G`` (rounded: the solver's integers are within its tolerance of whole)."""
    return int(round(pyo.value(m.component(f"units{name}"))))


def commitment_schedule(m: pyo.ConcreteModel, data: CommitmentData) -> tuple[int, NDArray[np.int64], NDArray[np.int64]]:
    """The incumbent's reservation, on-demand lots per block and deployments ``G_mb`` (models x blocks)."""
    lots = np.array([round(pyo.value(m.lots[b])) for b in range(data.n_blocks)], dtype=np.int64)
    deployed = np.array([[units_bought(m.model[i], f"_{b}") for b in range(data.n_blocks)] for i in range(len(data.windows))], dtype=np.int64)
    return int(round(pyo.value(m.reservation))), lots, deployed


# ---------------------------------------------------------------- the same hybrid and backlog rows as arrays


def _grid_columns(grid: PurchaseGrid, unit_per_hour: float) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """Columns 0 (``y``) and 1 (``k``): cost, lower, upper, integrality."""
    return (np.array([unit_per_hour * grid.min_units, unit_per_hour * grid.increment_units]), np.zeros(2),
            np.array([1.0, float(grid.max_steps)]), np.array([1, 1], dtype=np.int32))


def _pass_args(cost, lower, upper, integer, rows: NDArray, cols: NDArray, values: NDArray, row_lower, row_upper) -> tuple:
    """``Highs.passModel`` arguments (column-wise, minimising) from triplets."""
    matrix = coo_matrix((values, (rows, cols)), shape=(len(row_lower), len(cost))).tocsc()
    return (len(cost), len(row_lower), int(matrix.nnz), 1, 1, 0.0, np.asarray(cost, dtype=np.float64), np.asarray(lower, dtype=np.float64),
            np.asarray(upper, dtype=np.float64), np.asarray(row_lower, dtype=np.float64), np.asarray(row_upper, dtype=np.float64),
            matrix.indptr[:-1].astype(np.int32), matrix.indices.astype(np.int32), matrix.data.astype(np.float64),
            np.asarray(integer, dtype=np.int32))


def hybrid_arrays(windows: SpillWindows, grid: PurchaseGrid, unit_per_hour: float) -> tuple:
    """:func:`build_hybrid` as arrays: columns ``y, k, o_n`` (busy windows); rows ``a (m y + s k) + o_n >= D_n``
    and ``k - K y <= 0``."""
    busy = np.flatnonzero(windows.work > 0)
    b = len(busy)
    cost, lower, upper, integer = _grid_columns(grid, unit_per_hour)
    a = windows.work_per_unit
    r = np.arange(b)
    rows = np.concatenate([r, r, r, [b, b]])
    cols = np.concatenate([np.zeros(b), np.ones(b), 2 + r, [0, 1]]).astype(np.int64)
    values = np.concatenate([np.full(b, a * grid.min_units), np.full(b, a * grid.increment_units), np.ones(b), [-grid.max_steps, 1.0]])
    return _pass_args(np.concatenate([cost, windows.price_per_work[busy] / windows.hours]), np.concatenate([lower, np.zeros(b)]),
                      np.concatenate([upper, np.full(b, np.inf)]), np.concatenate([integer, np.zeros(b, dtype=np.int32)]),
                      rows, cols, values, np.concatenate([windows.work[busy], [-np.inf]]), np.concatenate([np.full(b, np.inf), [0.0]]))


def backlog_arrays(windows: SpillWindows, grid: PurchaseGrid, unit_per_hour: float, tau: float, max_wait_s: float) -> tuple:
    """:func:`build_backlog` as arrays: columns ``y, k, q_0..q_{N-1}, o_n`` (busy windows); rows
    ``a G + q_n - q_{n-1} + o_n >= D_n``, ``q_n - tau W G <= 0`` and ``k - K y <= 0``."""
    n = len(windows.work)
    busy = np.flatnonzero(windows.work > 0)
    b = len(busy)
    cost, lower, upper, integer = _grid_columns(grid, unit_per_hour)
    a, cap = windows.work_per_unit, tau * max_wait_s
    r = np.arange(n)
    q = 2 + r  # backlog columns
    o = 2 + n + np.arange(b)  # spill columns
    rows = np.concatenate([r, r, r, r[1:], busy, n + r, n + r, n + r, [2 * n, 2 * n]])
    cols = np.concatenate([np.zeros(n), np.ones(n), q, q[:-1], o, np.zeros(n), np.ones(n), q, [0, 1]]).astype(np.int64)
    values = np.concatenate([np.full(n, a * grid.min_units), np.full(n, a * grid.increment_units), np.ones(n), -np.ones(n - 1), np.ones(b),
                             np.full(n, -cap * grid.min_units), np.full(n, -cap * grid.increment_units), np.ones(n), [-grid.max_steps, 1.0]])
    return _pass_args(np.concatenate([cost, np.zeros(n), windows.price_per_work[busy] / windows.hours]),
                      np.concatenate([lower, np.zeros(n + b)]), np.concatenate([upper, np.full(n, np.inf), windows.work[busy]]),
                      np.concatenate([integer, np.zeros(n + b, dtype=np.int32)]), rows, cols, values,
                      np.concatenate([windows.work, np.full(n + 1, -np.inf)]), np.concatenate([np.full(n, np.inf), np.zeros(n + 1)]))


def units_from_columns(values: NDArray[np.float64], grid: PurchaseGrid) -> int:
    """``G = m y + s k`` from an array model's first two columns."""
    return int(round(grid.min_units * values[0] + grid.increment_units * values[1]))
