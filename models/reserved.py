"""Reserved-capacity models (kind ``reserved``): how many units to buy, and what spills to pay-as-you-go.

Notation (optfleet/problems/reserved/windows.py): window ``n`` of ``Delta`` seconds needs ``X_n = D_n / (tau Delta)``
units; spilling ``o_n`` unit-windows of it (``tau Delta o_n`` adjusted tokens) costs ``pi_n o_n`` with
``pi_n = p_n tau Delta``; ``H`` hours is the windows' span; a unit costs ``c`` $ per hour.  Purchases lie on the grid
``G in {0, m, m + s, m + 2s, ...}`` (minimum ``m``, step ``s``): ``G = m y + s k`` with ``y`` binary and ``k``
integer, ``k <= K y``.  The models count work in unit-windows and minimise dollars over the ``H`` hours (the
drivers divide by ``H`` for $/h): a week of 1-s windows in adjusted tokens and $/h would give spill costs near
1e-9, below HiGHS's optimality tolerances.

* **hybrid** (:func:`build_hybrid`): ``min c H G + sum_n pi_n o_n`` s.t. ``o_n >= X_n - G``, ``o_n >= 0``.
  Every window's tokens beyond the units spill, none waits: slosizer's hybrid rule, so the optimum equals
  the exhaustive scan's over the same grid.
* **backlog** (:func:`build_backlog`): work may wait; ``q_n`` is the backlog (unit-windows) at the end of window
  ``n``: ``q_n >= q_{n-1} + X_n - G - o_n``, ``0 <= q_n <= (W / Delta) G`` (what is queued drains within ``W``
  seconds), ``0 <= o_n <= X_n`` (a window spills from its own arrivals, at its own price).  A ``q_n`` above the
  true backlog ``max(0, ...)`` only tightens the cap, so the LP's optimum is the true one.
* **chance** (:func:`build_chance`): ``min G`` s.t., at every window width, ``G + X_n z_n >= X_n`` and
  ``sum_n z_n <= floor(eps N)`` with ``z_n`` binary (window ``n`` may overload): ``P(X_n > G) <= eps``.
  Binaries are made only for the ``floor(eps N) + 1`` busiest windows; every other window is held by one row
  ``G >= X`` of the busiest among them (a plan overloading a window outside the busiest ``k + 1`` keeps one of
  those ``k + 1`` below ``G``, which is then above every window outside them, so fixing ``z = 0`` there loses
  nothing).
* **robust** (:func:`build_robust`): one ``G`` for scenarios ``s``: ``min T`` s.t.
  ``T >= c H G + (H / H_s) sum_n pi_sn o_sn`` (``H`` the longest scenario: ``T / H`` is the worst $/h) and the
  hybrid rows per scenario, optionally the chance rows per scenario.
* **commitment** (:func:`build_commitment`): a reservation ``R`` (integer units, whole horizon, ``c``/h),
  deployments ``G_mb`` per model ``m`` and block ``b`` on model ``m``'s grid, on-demand units ``u_b`` beyond the
  reservation, bought in lots ``v_b`` that last ``T`` blocks (``u_b = sum_{b-T < b' <= b} v_b'``) at ``c_od``/h:
  ``min c R H + c_od h_blk T sum_b v_b + sum_mn pi_mn o_mn`` s.t. ``sum_m G_mb <= R + u_b``,
  ``o_mn >= X_mn - G_m,b(n)``.  A lot bought near the end is paid for its whole term.

Pyomo models for traces up to :data:`PYOMO_WINDOW_LIMIT` windows; beyond it the hybrid and robust (without
overload limits) models are built as arrays (:func:`hybrid_arrays`, :func:`robust_arrays`), and the backlog model is
solved unit count by unit count (optfleet/problems/reserved/backlog.py) with :func:`backlog_fixed_arrays`.
The hybrid and robust arrays first merge the windows between consecutive grid points
(:func:`merge_between_grid_points`), exact because ``G`` only takes grid values: for the windows with
``g_j < X_n <= g_{j+1}``, ``sum_n pi_n (X_n - G)+ = Pi (Y - G)+`` at every grid point ``G``, with ``Pi = sum_n pi_n``
and ``Y = sum_n pi_n X_n / Pi`` (both sides are ``Pi Y - Pi G`` for ``G <= g_j`` and 0 for ``G >= g_{j+1}``).  A
week of 1-s windows becomes a row per grid point (the simplex otherwise needs a pivot per window: over a minute).
The backlog rows link consecutive windows and cannot be merged; its joint model at a week of 1-s windows is
beyond the simplex (a pivot per window, over 4 minutes without a root bound).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo
from numpy.typing import NDArray

from optfleet.models.arrays import pass_model_args
from optfleet.models.linear import scaled, total

PYOMO_WINDOW_LIMIT = 20_000  # windows above which the hybrid and robust models are arrays and the backlog is solved per unit count


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
    """One trace's windows as the models see them: ``X_n``, ``pi_n`` ($ per unit-window spilled), ``H`` hours and
    ``Delta`` seconds."""

    units_needed: NDArray[np.float64]
    spill_price: NDArray[np.float64]
    hours: float
    width_s: float


@dataclass(frozen=True)
class OverloadLimit:
    """``P(X_n > G) <= eps`` at one window width: ``X_n`` and ``floor(eps N)``."""

    units_needed: NDArray[np.float64]
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
    """``o_n >= X_n - G`` over the windows with work (an empty window spills nothing); returns them."""
    busy = np.flatnonzero(windows.units_needed > 0).tolist()
    spill = pyo.Var(busy, domain=pyo.NonNegativeReals)
    m.add_component(f"spill{name}", spill)
    needed = windows.units_needed.tolist()
    m.add_component(f"spill_beyond_units{name}", pyo.Constraint(busy, rule=lambda _, n: spill[n] + capacity >= needed[n]))
    return busy


def spill_cost(m: pyo.Block, windows: SpillWindows, busy: list[int], name: str = "", scale: float = 1.0):
    """``scale * sum_n pi_n o_n`` ($ over the windows' span, times ``scale``)."""
    spill = m.component(f"spill{name}")
    price = windows.spill_price
    return scaled([(scale * float(price[n]), spill[n]) for n in busy if price[n] > 0])


def add_overload_limit(m: pyo.Block, limit: OverloadLimit, units: pyo.Expression, name: str) -> None:
    """``P(X_n > G) <= eps`` with binaries on the busiest ``floor(eps N) + 1`` windows (module docstring)."""
    order = np.argsort(-limit.units_needed, kind="stable")
    candidates = order[: limit.allowed + 1].tolist()
    rest = order[limit.allowed + 1:]
    overload = pyo.Var(candidates, domain=pyo.Binary)
    m.add_component(f"overload{name}", overload)
    needed = limit.units_needed.tolist()
    m.add_component(f"overload_or_cover{name}", pyo.Constraint(candidates, rule=lambda _, n: units + needed[n] * overload[n] >= needed[n]))
    m.add_component(f"overload_count{name}", pyo.Constraint(expr=total([overload[n] for n in candidates]) <= limit.allowed))
    if len(rest):
        m.add_component(f"cover_rest{name}", pyo.Constraint(expr=units >= float(limit.units_needed[rest[0]])))


# ---------------------------------------------------------------- the models


def build_hybrid(windows: SpillWindows, grid: PurchaseGrid, unit_per_hour: float) -> pyo.ConcreteModel:
    m = pyo.ConcreteModel(name="reserved_hybrid")
    units = add_units(m, grid)
    busy = add_spill(m, windows, units)
    m.cost = pyo.Objective(expr=unit_per_hour * windows.hours * units + spill_cost(m, windows, busy), sense=pyo.minimize)
    return m


def build_backlog(windows: SpillWindows, grid: PurchaseGrid, unit_per_hour: float, max_wait_s: float) -> pyo.ConcreteModel:
    m = pyo.ConcreteModel(name="reserved_backlog")
    units = add_units(m, grid)
    n_windows = len(windows.units_needed)
    busy = np.flatnonzero(windows.units_needed > 0).tolist()
    needed = windows.units_needed.tolist()
    m.spill = pyo.Var(busy, domain=pyo.NonNegativeReals, bounds=lambda _, n: (0.0, needed[n]))
    m.backlog = pyo.Var(range(n_windows), domain=pyo.NonNegativeReals)
    busy_set = set(busy)

    def carried(_, n):
        previous = m.backlog[n - 1] if n else 0.0
        spilled = m.spill[n] if n in busy_set else 0.0
        return m.backlog[n] - previous + spilled + units >= needed[n]

    m.carried = pyo.Constraint(range(n_windows), rule=carried)
    wait_windows = max_wait_s / windows.width_s
    m.wait_limit = pyo.Constraint(range(n_windows), rule=lambda _, n: m.backlog[n] <= wait_windows * units)
    m.cost = pyo.Objective(expr=unit_per_hour * windows.hours * units + spill_cost(m, windows, busy), sense=pyo.minimize)
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
    hours = robust_hours(scenarios)
    m.worst_cost = pyo.Var(domain=pyo.NonNegativeReals)
    m.scenario = pyo.Block(range(len(scenarios)))
    for s, windows in enumerate(scenarios):
        block = m.scenario[s]
        busy = add_spill(block, windows, units)
        block.cost_at_most_worst = pyo.Constraint(
            expr=m.worst_cost >= unit_per_hour * hours * units + spill_cost(block, windows, busy, scale=hours / windows.hours))
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


def robust_hours(scenarios: list[SpillWindows]) -> float:
    """``H`` of the robust model: the longest scenario's hours (its objective is ``H`` times the worst $/h)."""
    return max(s.hours for s in scenarios)


def build_commitment(data: CommitmentData) -> pyo.ConcreteModel:
    m = pyo.ConcreteModel(name="reserved_commitment")
    blocks = range(data.n_blocks)
    hours = data.windows[0].hours
    m.reservation = pyo.Var(domain=pyo.NonNegativeIntegers, bounds=(0, data.max_reservation_units))
    m.lots = pyo.Var(blocks, domain=pyo.NonNegativeIntegers, bounds=(0, data.max_reservation_units))
    m.served_model = pyo.Block(range(len(data.windows)))
    deployed = {}
    spill_terms = []
    for i, (grid, windows) in enumerate(zip(data.grids, data.windows, strict=True)):
        block = m.served_model[i]
        for b in blocks:
            deployed[i, b] = add_units(block, grid, f"_{b}")
        busy = np.flatnonzero(windows.units_needed > 0).tolist()
        block.spill = pyo.Var(busy, domain=pyo.NonNegativeReals)
        needed = windows.units_needed.tolist()
        of = data.block_of_window.tolist()
        block.spill_beyond_units = pyo.Constraint(busy, rule=lambda blk, n, i=i, needed=needed, of=of:
                                                  blk.spill[n] + deployed[i, of[n]] >= needed[n])
        spill_terms.append(spill_cost(block, windows, busy))

    def covered(_, b):
        on_demand = total([m.lots[k] for k in range(max(0, b - data.term_blocks + 1), b + 1)])
        return sum(deployed[i, b] for i in range(len(data.windows))) <= m.reservation + on_demand

    m.deployed_within_units = pyo.Constraint(blocks, rule=covered)
    lot_cost = data.on_demand_per_hour * data.block_hours * data.term_blocks
    m.cost = pyo.Objective(expr=data.reservation_per_hour * hours * m.reservation + lot_cost * total([m.lots[b] for b in blocks])
                           + sum(spill_terms), sense=pyo.minimize)
    return m


def units_bought(m: pyo.Block, name: str = "") -> int:
    """The incumbent's ``G`` (rounded: the solver's integers are within its tolerance of whole)."""
    return int(round(pyo.value(m.component(f"units{name}"))))


def commitment_schedule(m: pyo.ConcreteModel, data: CommitmentData) -> tuple[int, NDArray[np.int64], NDArray[np.int64]]:
    """The incumbent's reservation, on-demand lots per block and deployments ``G_mb`` (models x blocks)."""
    lots = np.array([round(pyo.value(m.lots[b])) for b in range(data.n_blocks)], dtype=np.int64)
    deployed = np.array([[units_bought(m.served_model[i], f"_{b}") for b in range(data.n_blocks)] for i in range(len(data.windows))], dtype=np.int64)
    return int(round(pyo.value(m.reservation))), lots, deployed


# ---------------------------------------------------------------- the same hybrid and backlog rows as arrays


def grid_points(grid: PurchaseGrid) -> NDArray[np.float64]:
    """``0, m, m + s, ...`` up to ``max_units``."""
    return np.concatenate([[0.0], grid.min_units + grid.increment_units * np.arange(grid.max_steps + 1, dtype=np.float64)])


def merge_between_grid_points(windows: SpillWindows, grid: PurchaseGrid) -> SpillWindows:
    """One window per interval ``(g_j, g_{j+1}]`` of the grid (and one above it) holding ``Pi`` and ``Y`` of the
    windows in it (module docstring); windows needing nothing or spilling for free are left out."""
    keep = (windows.units_needed > 0) & (windows.spill_price > 0)
    needed, price = windows.units_needed[keep], windows.spill_price[keep]
    interval = np.searchsorted(grid_points(grid), needed, side="left")
    count = grid.max_steps + 3
    total_price = np.bincount(interval, weights=price, minlength=count)
    weighted = np.bincount(interval, weights=price * needed, minlength=count)
    used = total_price > 0
    return SpillWindows(weighted[used] / total_price[used], total_price[used], windows.hours, windows.width_s)


def _grid_columns(grid: PurchaseGrid, unit_cost: float) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """Columns 0 (``y``) and 1 (``k``) at ``unit_cost`` $ per unit: cost, lower, upper, integrality."""
    return (np.array([unit_cost * grid.min_units, unit_cost * grid.increment_units]), np.zeros(2),
            np.array([1.0, float(grid.max_steps)]), np.array([1, 1], dtype=np.int32))


def _units_triplets(grid: PurchaseGrid, rows: NDArray, scale: float = 1.0) -> tuple[NDArray, NDArray, NDArray]:
    """``scale G = scale (m y + s k)`` in each of ``rows``: (rows, cols, values)."""
    count = len(rows)
    return (np.concatenate([rows, rows]), np.concatenate([np.zeros(count), np.ones(count)]).astype(np.int64),
            np.concatenate([np.full(count, scale * grid.min_units), np.full(count, scale * grid.increment_units)]))


def _spill_triplets(windows: SpillWindows, grid: PurchaseGrid, first_col: int, first_row: int) -> tuple[NDArray, ...]:
    """The rows ``m y + s k + o_n >= X_n`` over the busy windows, ``o_n`` in columns from ``first_col`` and rows
    from ``first_row``: (rows, cols, values, right-hand sides, the busy windows)."""
    busy = np.flatnonzero(windows.units_needed > 0)
    r = first_row + np.arange(len(busy))
    g_rows, g_cols, g_values = _units_triplets(grid, r)
    return (np.concatenate([g_rows, r]), np.concatenate([g_cols, first_col + np.arange(len(busy))]),
            np.concatenate([g_values, np.ones(len(busy))]), windows.units_needed[busy], busy)


def hybrid_arrays(windows: SpillWindows, grid: PurchaseGrid, unit_per_hour: float) -> tuple:
    """:func:`build_hybrid` as arrays over the merged windows (module docstring): columns ``y, k, o_n``; rows
    ``m y + s k + o_n >= X_n`` and ``k - K y <= 0``."""
    windows = merge_between_grid_points(windows, grid)
    rows, cols, values, rhs, busy = _spill_triplets(windows, grid, 2, 0)
    b = len(busy)
    cost, lower, upper, integer = _grid_columns(grid, unit_per_hour * windows.hours)
    return pass_model_args(np.concatenate([cost, windows.spill_price[busy]]), np.concatenate([lower, np.zeros(b)]),
                      np.concatenate([upper, np.full(b, np.inf)]), np.concatenate([integer, np.zeros(b, dtype=np.int32)]),
                      np.concatenate([rows, [b, b]]), np.concatenate([cols, [0, 1]]), np.concatenate([values, [-grid.max_steps, 1.0]]),
                      np.concatenate([rhs, [-np.inf]]), np.concatenate([np.full(b, np.inf), [0.0]]))


def robust_arrays(scenarios: list[SpillWindows], grid: PurchaseGrid, unit_per_hour: float) -> tuple:
    """:func:`build_robust` without overload limits, as arrays over each scenario's merged windows (module
    docstring): columns ``y, k, T`` then every scenario's ``o_sn``;
    rows: each scenario's spill rows, its ``T - c H G - (H / H_s) sum_n pi_sn o_sn >= 0``, and ``k - K y <= 0``;
    minimise ``T``."""
    hours = robust_hours(scenarios)
    parts, epigraph = [], []
    col, row = 3, 0
    for windows in scenarios:
        windows = merge_between_grid_points(windows, grid)
        rows, cols, values, rhs, busy = _spill_triplets(windows, grid, col, row)
        parts.append((rows, cols, values, rhs))
        epigraph.append((col, len(busy), windows.spill_price[busy] * hours / windows.hours))
        col += len(busy)
        row += len(busy)
    n_cols, first_epigraph, s = col, row, len(scenarios)
    e_rows, e_cols, e_values = [], [], []
    for i, (first, count, price) in enumerate(epigraph):
        g_rows, g_cols, g_values = _units_triplets(grid, np.array([first_epigraph + i]), -unit_per_hour * hours)
        e_rows += [g_rows, np.full(count + 1, first_epigraph + i)]
        e_cols += [g_cols, np.concatenate([[2], first + np.arange(count)])]
        e_values += [g_values, np.concatenate([[1.0], -price])]
    last = first_epigraph + s
    rows = np.concatenate([*(p[0] for p in parts), *e_rows, [last, last]])
    cols = np.concatenate([*(p[1] for p in parts), *e_cols, [0, 1]]).astype(np.int64)
    values = np.concatenate([*(p[2] for p in parts), *e_values, [-grid.max_steps, 1.0]])
    cost = np.zeros(n_cols)
    cost[2] = 1.0
    upper = np.full(n_cols, np.inf)
    upper[:2] = [1.0, float(grid.max_steps)]
    integer = np.zeros(n_cols, dtype=np.int32)
    integer[:2] = 1
    row_lower = np.concatenate([*(p[3] for p in parts), np.zeros(s), [-np.inf]])
    row_upper = np.concatenate([np.full(first_epigraph + s, np.inf), [0.0]])
    return pass_model_args(cost, np.zeros(n_cols), upper, integer, rows, cols, values, row_lower, row_upper)


def backlog_fixed_arrays(units_needed: NDArray[np.float64], spill_price: NDArray[np.float64], starts: NDArray[np.bool_], units: float,
                         wait_windows: float) -> tuple:
    """:func:`build_backlog` at a fixed unit count ``G``, as an LP over some windows: columns ``q_n`` then ``o_n``;
    rows ``q_n - q_{n-1} + o_n >= X_n - G`` (no ``q_{n-1}`` where ``starts``: the queue is empty before a
    segment), ``0 <= q_n <= (W / Delta) G``, ``0 <= o_n <= X_n``; minimise ``sum_n pi_n o_n``."""
    n = len(units_needed)
    r = np.arange(n)
    linked = np.flatnonzero(~starts[1:]) + 1 if n > 1 else np.zeros(0, dtype=np.int64)
    rows = np.concatenate([r, linked, r])
    cols = np.concatenate([r, linked - 1, n + r])
    values = np.concatenate([np.ones(n), -np.ones(len(linked)), np.ones(n)])
    cost = np.concatenate([np.zeros(n), spill_price])
    upper = np.concatenate([np.full(n, wait_windows * units), units_needed])
    return pass_model_args(cost, np.zeros(2 * n), upper, np.zeros(2 * n, dtype=np.int32), rows, cols, values, units_needed - units, np.full(n, np.inf))


def units_from_columns(values: NDArray[np.float64], grid: PurchaseGrid) -> int:
    """``G = m y + s k`` from an array model's first two columns."""
    return int(round(grid.min_units * values[0] + grid.increment_units * values[1]))
