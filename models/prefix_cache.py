"""The hindsight-optimal prefix-tree (radix) KV cache as a MILP: keep-through-gap binaries with tree constraints.

Notation (optfleet.problems.prefix_cache.trace): occurrence ``o`` is a block
of a request's path; a *gap* ``j`` is an occurrence ``o_j`` with a next
occurrence ``o'_j`` (same block, later request), open over the events
``r1_j = request(o_j) .. r2_j - 1`` with ``r2_j = request(o'_j)``.

Why one binary per gap is exact.  A block enters the cache only when a
request computes it, so it is resident when ``r2_j`` arrives iff it stayed
resident through the whole gap; residency at any other time only costs space.
So any schedule of resident sets maps to ``y_j = [block resident when r2_j
arrives]`` using no more space after any event, and back (evaluate.py).

    y_j in {0, 1}                                           keep gap j            (1)
    capacity[k]:  sum_{j : r1_j <= k < r2_j} y_j <= C        blocks after event k  (2)
    closure[j, i]:  y_j <= y_i   for each gap i of parent(block_j) with
                    o_j - 1 <= o_i < o'_j - 1                (``leaves`` setting)  (3)

(3) says the parent stays resident through the child's gap: the parent's
occurrences in ``r1_j .. r2_j - 1`` start the parent gaps covering it (a
parent occurs wherever its child does, so ``o_j - 1`` and ``o'_j - 1`` are its
occurrences in ``r1_j`` and ``r2_j``).  Under (3) the kept blocks of a path
form a prefix, so request ``r``'s hit tokens are

    H_r = sum_{j : r2_j = r} tokens(o'_j) h_j,   h_j = y_j    (``leaves``)         (4)

Under the ``any`` setting (a block may outlive its parent, and is reused once
the parent is computed again) (3) is dropped and the hit needs the whole
prefix: ``0 <= h_j <= y_j`` and ``h_j <= h_i`` for the gap ``i`` of the
parent's occurrence ``o'_j - 1`` (5).  Every ``leaves`` schedule is an ``any``
schedule, so the ``any`` optimum bounds the ``leaves`` optimum.

Objectives: ``hit_tokens``: max ``sum_r H_r`` (6); ``tel`` (Tail-Optimized
Caching for LLM Inference, Zhang et al.): min ``sum_r e_r`` with ``e_r >= 0``
and ``e_r >= alpha (input_r - H_r) + beta - xi`` (7); ``violations``: min
``sum_r v_r``, ``v_r`` binary, ``alpha (input_r - H_r) + beta - slo <= M_r
v_r`` with ``M_r = alpha input_r + beta - slo`` (8; requests with ``M_r <= 0``
never violate and get no row).

Queueing (the ``fcfs_server`` setting, optfleet.problems.prefix_cache.evaluate):
one FCFS prefill server, request ``r`` arriving ``g_r = a_r - a_{r-1}`` ms
after the one before, its prefill ``S_r = alpha (input_r - H_r) + beta``.
Wait columns ``w_r >= 0``, ``w_0 = 0`` and

    wait[r]:  w_r >= w_{r-1} + S_{r-1} - g_r          (r >= 1)                    (9)

and ``TTFT_r = w_r + S_r`` in (7) and (8), with ``M_r = W0_r + alpha input_r +
beta - slo`` in (8), ``W0`` the waits when nothing is cached (the largest:
Lindley's recursion is non-decreasing in every ``S``).  This is exact, not a
relaxation: for fixed hits the true waits (Lindley, ``w_r = max(0, w_{r-1} +
S_{r-1} - g_r)``) are the smallest ``w`` meeting (9), by induction on ``r``,
and (7) and (8) only get harder as any ``w_r`` grows, so some optimum has the
true waits.  Hits do not change with the server (the replay serves requests
one at a time in arrival order with the running request's path pinned, and
no two prefills overlap), so (1)-(6) are unchanged and ``hit_tokens`` needs
no wait columns.  The capacity rows have the interval
structure of the caching kind's LP (totally unimodular); (3) and (5) break it,
which is why this is a MILP.  ``relax=True`` gives its LP relaxation, a bound.

Two builders.  :func:`build` is the Pyomo model (named components, for small
instances and for users adding constraints).  :func:`highs_lp_arrays` is the
LP relaxation as column-wise arrays for ``highspy.Highs.passModel``, for
traces where the interval rows (2) are too dense (a gap spans every request
until the block's next use: 76 million nonzeros on the Mooncake conversation
trace at 2,000 blocks).  It writes (2) row-differenced: an occupancy column
``o_k in [0, C]`` per event and

    o_k - o_{k-1} - sum_{j : r1_j = k} y_j + sum_{j : r2_j = k} y_j = 0          (2')

so each ``y_j`` has two nonzeros there.  Both builders give the same LP
optimum (tests/test_prefix_cache.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo
from numpy.typing import NDArray

OBJECTIVES = ("hit_tokens", "tel", "violations")


@dataclass(frozen=True)
class PrefixMilpData:
    """Numbers of (1)-(8): gaps (columns), binding capacity rows, closure or prefix pairs, per-request TTFT terms."""

    n_requests: int
    eviction: str
    objective: str
    capacity_blocks: int
    col_occurrence: NDArray[np.int64]      # o_j
    col_first_event: NDArray[np.int64]     # r1_j
    col_hit_request: NDArray[np.int64]     # r2_j
    col_tokens: NDArray[np.int64]          # tokens(o'_j)
    col_first_row: NDArray[np.int64]
    col_end_row: NDArray[np.int64]
    row_event: NDArray[np.int64]
    row_capacity: NDArray[np.int64]
    pair_child: NDArray[np.int64]          # (3) or (5): y_child <= y_parent (leaves) or h_child <= h_parent (any)
    pair_parent: NDArray[np.int64]
    input_tokens: NDArray[np.int64]
    alpha_ms_per_token: float
    beta_ms: float
    threshold_ms: float                    # xi for ``tel``, the SLO for ``violations``
    arrival_gap_ms: NDArray[np.float64] | None = None   # g_r of (9), g_0 = 0; None: no FCFS server (instantaneous service)
    max_wait_ms: NDArray[np.float64] | None = None      # W0_r of (8) with the server

    @property
    def queueing(self) -> bool:
        """Whether (9) applies: an FCFS server and a tail objective."""
        return self.arrival_gap_ms is not None and self.objective != "hit_tokens"

    def violation_big_ms(self) -> NDArray[np.float64]:
        """``M_r`` of (8): the largest ``TTFT_r - slo`` (nothing cached, and the largest wait with the server)."""
        worst = self.alpha_ms_per_token * self.input_tokens.astype(float) + self.beta_ms - self.threshold_ms
        return worst + self.max_wait_ms if self.queueing and self.max_wait_ms is not None else worst

    @property
    def n_columns(self) -> int:
        return len(self.col_occurrence)


def build(data: PrefixMilpData, relax: bool = False) -> pyo.ConcreteModel:
    """The model of ``data``: ``m.y``, ``m.h``, ``m.capacity``, ``m.closure`` or ``m.prefix``, ``m.hit_tokens``, the objective."""
    m = pyo.ConcreteModel(name="hindsight-prefix-cache")
    add_keep_vars(m, data, relax)
    add_capacity_rows(m, data)
    if data.eviction == "leaves":
        add_closure_rows(m, data)
    else:
        add_prefix_hit_rows(m, data)
    add_hit_tokens(m, data)
    if data.queueing:
        add_wait_rows(m, data)
    {"hit_tokens": add_hit_objective, "tel": add_tel_objective, "violations": add_violation_objective}[data.objective](m, data, relax)
    return m


def add_keep_vars(m: pyo.ConcreteModel, data: PrefixMilpData, relax: bool) -> None:
    """(1): ``m.y[j]`` keeps gap ``j``'s block (``[0, 1]`` when relaxed)."""
    m.J = pyo.RangeSet(0, data.n_columns - 1)
    m.y = pyo.Var(m.J, domain=pyo.UnitInterval if relax else pyo.Binary)


def add_capacity_rows(m: pyo.ConcreteModel, data: PrefixMilpData) -> None:
    """(2): ``m.capacity[i]``, the kept gaps open after event ``row_event[i]`` fit in ``C`` blocks."""
    columns_of_row: list[list[int]] = [[] for _ in range(len(data.row_event))]
    for j, (a, b) in enumerate(zip(data.col_first_row.tolist(), data.col_end_row.tolist(), strict=True)):
        for i in range(a, b):
            columns_of_row[i].append(j)
    m.capacity = pyo.Constraint(range(len(data.row_event)),
                                rule=lambda m, i: pyo.quicksum(m.y[j] for j in columns_of_row[i]) <= int(data.row_capacity[i]))


def add_closure_rows(m: pyo.ConcreteModel, data: PrefixMilpData) -> None:
    """(3): ``m.closure[p]``, a kept block's parent is kept through the same gap (``leaves``)."""
    m.closure = pyo.Constraint(range(len(data.pair_child)), rule=lambda m, p: m.y[int(data.pair_child[p])] <= m.y[int(data.pair_parent[p])])
    m.h = pyo.Reference(m.y)


def add_prefix_hit_rows(m: pyo.ConcreteModel, data: PrefixMilpData) -> None:
    """(5): ``m.h[j] <= m.y[j]`` (``m.kept_hit``) and ``m.h[child] <= m.h[parent]`` (``m.prefix``) (``any``)."""
    m.h = pyo.Var(m.J, bounds=(0, 1))
    m.kept_hit = pyo.Constraint(m.J, rule=lambda m, j: m.h[j] <= m.y[j])
    m.prefix = pyo.Constraint(range(len(data.pair_child)), rule=lambda m, p: m.h[int(data.pair_child[p])] <= m.h[int(data.pair_parent[p])])


def add_hit_tokens(m: pyo.ConcreteModel, data: PrefixMilpData) -> None:
    """(4): ``m.hit_tokens[r]``, the tokens request ``r`` finds cached."""
    columns_of_request: list[list[int]] = [[] for _ in range(data.n_requests)]
    for j, r in enumerate(data.col_hit_request.tolist()):
        columns_of_request[r].append(j)
    m.R = pyo.RangeSet(0, data.n_requests - 1)
    m.hit_tokens = pyo.Expression(m.R, rule=lambda m, r: pyo.quicksum(int(data.col_tokens[j]) * m.h[j] for j in columns_of_request[r]))


def add_wait_rows(m: pyo.ConcreteModel, data: PrefixMilpData) -> None:
    """(9): ``m.wait[r]`` (ms, ``m.wait[0]`` fixed at 0) at least the wait Lindley's recursion gives (``m.wait_row``)."""
    m.wait = pyo.Var(m.R, domain=pyo.NonNegativeReals)
    m.wait[0].fix(0.0)
    gap = data.arrival_gap_ms
    m.wait_row = pyo.Constraint(range(1, data.n_requests), rule=lambda m, r: m.wait[r] >= m.wait[r - 1] + data.alpha_ms_per_token * (
        int(data.input_tokens[r - 1]) - m.hit_tokens[r - 1]) + data.beta_ms - float(gap[r]))


def add_hit_objective(m: pyo.ConcreteModel, data: PrefixMilpData, relax: bool) -> None:
    """(6): maximise the total hit tokens ``m.total_hit_tokens``."""
    m.total_hit_tokens = pyo.Expression(expr=pyo.quicksum(m.hit_tokens[r] for r in m.R))
    m.objective = pyo.Objective(expr=m.total_hit_tokens, sense=pyo.maximize)


def _excess_ms(m: pyo.ConcreteModel, data: PrefixMilpData, r: int) -> pyo.Expression:
    prefill_ms = data.alpha_ms_per_token * (int(data.input_tokens[r]) - m.hit_tokens[r]) + data.beta_ms
    return (m.wait[r] + prefill_ms if data.queueing else prefill_ms) - data.threshold_ms


def add_tel_objective(m: pyo.ConcreteModel, data: PrefixMilpData, relax: bool) -> None:
    """(7): ``m.excess[r] >= TTFT_r - xi`` (``m.excess_row``), minimise ``m.tel`` (ms)."""
    m.excess = pyo.Var(m.R, domain=pyo.NonNegativeReals)
    m.excess_row = pyo.Constraint(m.R, rule=lambda m, r: m.excess[r] >= _excess_ms(m, data, r))
    m.tel = pyo.Expression(expr=pyo.quicksum(m.excess[r] for r in m.R))
    m.objective = pyo.Objective(expr=m.tel, sense=pyo.minimize)


def add_violation_objective(m: pyo.ConcreteModel, data: PrefixMilpData, relax: bool) -> None:
    """(8): ``m.violated[r]`` covers ``TTFT_r > slo`` (``m.violation_row``), minimise ``m.violations``."""
    big = data.violation_big_ms()
    at_risk = [r for r in range(data.n_requests) if big[r] > 0]
    m.violated = pyo.Var(at_risk, domain=pyo.UnitInterval if relax else pyo.Binary)
    m.violation_row = pyo.Constraint(at_risk, rule=lambda m, r: _excess_ms(m, data, r) <= float(big[r]) * m.violated[r])
    m.violations = pyo.Expression(expr=pyo.quicksum(m.violated[r] for r in at_risk))
    m.objective = pyo.Objective(expr=m.violations, sense=pyo.minimize)


def extract(m: pyo.ConcreteModel, data: PrefixMilpData, n_occurrences: int) -> NDArray[np.bool_]:
    """The schedule ``kept[o]`` of the solved model (``y_j > 1/2``; unset reads as 0)."""
    kept = np.zeros(n_occurrences, dtype=bool)
    values = np.array([m.y[j].value or 0.0 for j in range(data.n_columns)])
    kept[data.col_occurrence[values > 0.5]] = True
    return kept


def highs_lp_arrays(data: PrefixMilpData) -> tuple:
    """Positional arguments of ``highspy.Highs.passModel`` for the LP relaxation of (1)-(9), capacity as (2').

    Columns: ``y`` (n), then ``h`` (n, ``any`` only), then ``o`` (one per request), then ``w`` (one per request, with
    queueing), then ``e`` (``tel``) or ``v`` (``violations``, requests with ``M_r > 0``).  Rows: (2') per request,
    then (3) or (5) pairs (and ``h <= y`` for ``any``), then (9) per request after the first (with queueing), then
    (7) or (8) per request.  The objective sense is HiGHS's (1 minimise, -1 maximise).
    """
    n, n_req = data.n_columns, data.n_requests
    hit_vars = data.eviction != "leaves"
    h0 = n if hit_vars else 0                     # first h column (h is y under ``leaves``)
    o0 = n + (n if hit_vars else 0)
    w0 = o0 + n_req                               # first w column (with queueing)
    t0 = w0 + (n_req if data.queueing else 0)     # first e or v column
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    lower: list[float] = []
    upper: list[float] = []

    def add(r, c, v):
        rows.append(np.asarray(r, dtype=np.int64))
        cols.append(np.asarray(c, dtype=np.int64))
        vals.append(np.asarray(v, dtype=float))

    # (2'): event rows 0..n_req-1
    j = np.arange(n)
    k = np.arange(n_req)
    add(k, o0 + k, np.ones(n_req))
    add(k[1:], o0 + k[:-1], -np.ones(n_req - 1))
    add(data.col_first_event, j, -np.ones(n))
    add(data.col_hit_request, j, np.ones(n))
    lower += [0.0] * n_req
    upper += [0.0] * n_req
    row = n_req
    # (3) or (5): child - parent <= 0 on y (leaves) or h (any)
    p = np.arange(len(data.pair_child))
    add(row + p, h0 + data.pair_child, np.ones(len(p)))
    add(row + p, h0 + data.pair_parent, -np.ones(len(p)))
    lower += [-np.inf] * len(p)
    upper += [0.0] * len(p)
    row += len(p)
    if hit_vars:  # h - y <= 0
        add(row + j, h0 + j, np.ones(n))
        add(row + j, j, -np.ones(n))
        lower += [-np.inf] * n
        upper += [0.0] * n
        row += n
    prefill_ms = data.alpha_ms_per_token * data.input_tokens.astype(float) + data.beta_ms   # with nothing cached
    if data.queueing:
        # (9): w_r - w_{r-1} + alpha H_{r-1} >= alpha input_{r-1} + beta - g_r, rows for r = 1 .. n_req - 1
        later = k[1:]
        add(row + later - 1, w0 + later, np.ones(n_req - 1))
        add(row + later - 1, w0 + later - 1, -np.ones(n_req - 1))
        feeds = data.col_hit_request < n_req - 1
        add(row + data.col_hit_request[feeds], h0 + j[feeds], data.alpha_ms_per_token * data.col_tokens[feeds])
        lower += (prefill_ms[:-1] - data.arrival_gap_ms[1:]).tolist()
        upper += [np.inf] * (n_req - 1)
        row += n_req - 1
    cost = np.zeros(t0)
    n_tail = 0
    sense, offset = 1, 0.0
    if data.objective == "hit_tokens":
        cost[h0:h0 + n] = data.col_tokens
        sense = -1
    else:
        # (7): e_r + alpha H_r (- w_r) >= alpha input_r + beta - xi;  (8): M_r v_r + alpha H_r (- w_r) >= alpha input_r + beta - slo
        need = prefill_ms - data.threshold_ms
        big = data.violation_big_ms()
        requests = np.arange(n_req) if data.objective == "tel" else np.flatnonzero(big > 0)
        n_tail = len(requests)
        slot = np.full(n_req, -1)
        slot[requests] = np.arange(n_tail)
        tail_coefficient = np.ones(n_tail) if data.objective == "tel" else big[requests]
        add(row + np.arange(n_tail), t0 + np.arange(n_tail), tail_coefficient)
        hit_row = slot[data.col_hit_request]
        on = hit_row >= 0
        add(row + hit_row[on], h0 + j[on], data.alpha_ms_per_token * data.col_tokens[on])
        if data.queueing:
            add(row + np.arange(n_tail), w0 + requests, -np.ones(n_tail))
        lower += need[requests].tolist()
        upper += [np.inf] * n_tail
        row += n_tail
    n_col = t0 + n_tail
    cost = np.concatenate([cost, np.ones(n_tail)])
    col_lower = np.zeros(n_col)
    col_upper = np.ones(n_col)
    col_upper[o0:w0] = data.capacity_blocks
    if data.queueing:
        col_upper[w0] = 0.0                   # w_0 = 0: the first request never waits
        col_upper[w0 + 1:t0] = np.inf
    if data.objective == "tel":
        col_upper[t0:] = np.inf
    r, c, v = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    order = np.lexsort((r, c))
    r, c, v = r[order], c[order], v[order]
    start = np.searchsorted(c, np.arange(n_col + 1))
    return (n_col, row, len(v), 1, sense, offset, cost, col_lower, col_upper, np.asarray(lower), np.asarray(upper),
            start[:-1].astype(np.int32), r.astype(np.int32), v, np.zeros(n_col, dtype=np.int32))
