"""A lower bound on the total KV admission wait: the servers' KV blocks pooled, each request a block-time rectangle.

**What each request must hold.**  Request ``r`` (arrival ``a_r``, ``P_r`` prompt and ``O_r`` output tokens,
``T_r = ceil((P_r + O_r) / B)`` blocks) is admitted at ``s_r >= a_r`` and from then on holds blocks until its
completion (server.py, cache.py):

* **Height.**  At least ``h_r`` of the distinct held blocks can be charged to ``r`` alone (:func:`own_blocks`):
  its ``T_r - floor(P_r / B)`` tail blocks (output positions), which stay private copies until it completes (only the
  full prompt blocks are published at its first token, and its reuse stops below ``floor((P_r - 1) / B)``), and
  each full prompt block whose name (cache.py: ``(group, k)`` inside the system prompt, else ``(session, k)``) no
  earlier request in the trace names.  Charge every held block to the earliest running request naming it (a tail
  copy to its owner): a block counted for ``r`` is named by nobody before ``r``, so no other running request counts
  it, and ``sum_{r running} h_r <= held <= M = sum_k C_k`` at every instant, servers pooled (``held + cached <= C_k``
  on each).  Every running request also takes one of the ``S = sum_k max_running_seqs_k`` sequence slots.
* **Length.**  ``r`` holds its blocks for at least ``L_r = min_k (f_rk + (O_r - 1) d_rk)``: its first token comes at
  least ``f_rk`` after admission on server ``k`` (bounds.py's per-request floor: its prefill iterations start at or
  after ``s_r``), and each of its ``O_r - 1`` later tokens takes one iteration in which it decodes and holds its
  ``T_r`` blocks, lasting at least ``d_rk = beta_k + sigma_k + kappa_k T_r`` (server.py's iteration time with
  ``n_decode >= 1``, ``held >= T_r``, no prefill).  Its TTFT is at least ``(s_r - a_r) + min_k f_rk``.

**The relaxation.**  Cut every schedule's hold of ``r`` to ``[s_r, s_r + L_r)``: rectangles of height ``h_r``, all
together at most ``M`` blocks and ``S`` sequences at any time.  Relax further to a fluid: ``r`` needs the area
``A_r = h_r L_r``, received at any rate in ``[0, h_r]`` from ``a_r`` on (preemption allowed), all rates summing to at
most ``M`` and the rates over the heights to at most ``S``.  Its mean busy date ``MBD_r = (1 / A_r) int t x_r(t) dt``
is ``s_r + L_r / 2`` for the rectangle (Goemans 1997's mean-busy-time relaxation), so

    sum_r (s_r - a_r)  >=  min_fluid sum_r MBD_r  -  sum_r (a_r + L_r / 2),

and ``mean TTFT >= that / n + mean_r min_k f_rk``.  The fluid minimum is a transportation LP over time slots
``[t_l, t_l+1)`` (a uniform grid to past the pooled blocks' fluid makespan, then one last slot ``[t_K, inf)``
without capacity): ``x_rl`` area of ``r`` in slot ``l``, at most ``h_r (t_l+1 - max(t_l, a_r))``,
valued at ``max(t_l, a_r)`` (the earliest date it can have there, so every schedule's slotted value is at most its
``sum MBD``), ``sum_r x_rl <= M (t_l+1 - t_l)``, ``sum_r x_rl / h_r <= S (t_l+1 - t_l)`` and ``sum_l x_rl = A_r``.
Every real schedule is a point of it, so its optimum (HiGHS, solved to optimality) is a valid lower bound.

The decode floor ``d_rk`` is the iteration of a lone decoder; under load an iteration also carries the other
requests' decodes, held blocks and prefill chunks, which this relaxation does not charge (docs/guide/placement.md
measures how much of the remaining gap that is).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

if TYPE_CHECKING:
    from optfleet.problems.placement.problem import PlacementProblem

GRID_SLOTS = 400  # uniform slots up to the fluid makespan
MAX_ARCS = 1_200_000  # request-slot variables above which the LP is not built (kv_hold part left out)


def own_blocks(problem: "PlacementProblem") -> np.ndarray:
    """``h_r``: request ``r``'s tail blocks ``T_r - floor(P_r / B)`` plus its full prompt blocks no earlier request
    names (module docstring)."""
    q, block = problem.requests, problem.block_tokens
    group_named: dict[int, int] = {}  # group -> blocks [0, n) named so far
    session_named: dict[int, np.ndarray] = {}  # session -> mask of session-named blocks so far
    own = np.zeros(len(q), dtype=np.int64)
    for r in range(len(q)):
        g, s = int(q.group[r]), int(q.session[r])
        full, total = int(q.prompt_tokens[r]) // block, int(problem.total_blocks[r])
        n_shared = int(q.shared_tokens[r]) // block if g >= 0 else 0
        in_group = min(n_shared, full)
        fresh_group = in_group - min(in_group, group_named.get(g, 0)) if g >= 0 else 0
        mask = session_named.get(s, np.zeros(0, dtype=bool))
        seen = mask[n_shared:full].sum() if full > n_shared else 0
        own[r] = total - full + fresh_group + max(0, full - n_shared) - int(seen)
        if g >= 0:
            group_named[g] = max(group_named.get(g, 0), n_shared)
        if mask.shape[0] < total:
            mask = np.concatenate([mask, np.zeros(total - mask.shape[0], dtype=bool)])
        mask[n_shared:total] = True
        session_named[s] = mask
    return own


def hold_floor_ms(problem: "PlacementProblem", prefill_floor_ms: np.ndarray) -> np.ndarray:
    """``L_r = min_k (f_rk + (O_r - 1) (beta_k + sigma_k + kappa_k T_r))`` for the per-request prefill floors
    ``f_rk`` (requests x servers)."""
    q = problem.requests
    beta = np.array([e.step_base_ms for e in problem.engines])
    sigma = np.array([e.step_ms_per_seq for e in problem.engines])
    kappa = np.array([e.step_ms_per_kv_block for e in problem.engines])
    decode = beta[None, :] + sigma[None, :] + kappa[None, :] * problem.total_blocks[:, None].astype(float)
    return (prefill_floor_ms + (q.output_tokens[:, None] - 1).astype(float) * decode).min(axis=1)


def slot_edges_ms(arrival_ms: np.ndarray, area: np.ndarray, hold_ms: np.ndarray, capacity_blocks: float) -> np.ndarray:
    """Slot boundaries: a uniform grid of ``GRID_SLOTS`` slots from the first arrival to past the pooled fluid's
    makespan (last arrival + all area / M + the longest hold); the last edge opens the unbounded slot."""
    end = float(arrival_ms.max() + area.sum() / capacity_blocks + hold_ms.max())
    return np.linspace(float(arrival_ms.min()), end, GRID_SLOTS + 1)


def fluid_mean_busy_dates_ms(arrival_ms: np.ndarray, height: np.ndarray, hold_ms: np.ndarray, capacity_blocks: float,
                             capacity_seqs: float, time_limit_s: float | None = None) -> float | None:
    """``min sum_r MBD_r`` of the slotted fluid LP (module docstring), solved to optimality by HiGHS; None when HiGHS
    stops at ``time_limit_s`` (an unproven value is no bound; any other failure is an error)."""
    area = height * hold_ms
    edges = slot_edges_ms(arrival_ms, area, hold_ms, capacity_blocks)
    starts, widths = edges[:-1], np.diff(edges)
    n, slots = len(arrival_ms), len(edges)  # slot `slots - 1` is [edges[-1], inf)
    first = np.searchsorted(edges, arrival_ms, side="right") - 1  # the slot holding a_r
    rows, cols, dates, caps = [], [], [], []
    for r in range(n):
        ls = np.arange(first[r], slots)
        lo = np.maximum(edges[ls], arrival_ms[r])
        hi = np.append(edges[ls[:-1] + 1], np.inf)
        keep = hi > lo
        ls, lo, hi = ls[keep], lo[keep], hi[keep]
        rows.append(np.full(len(ls), r))
        cols.append(ls)
        dates.append(lo / area[r])
        caps.append(height[r] * (hi - lo))
    row, col = np.concatenate(rows), np.concatenate(cols)
    cost, cap = np.concatenate(dates), np.concatenate(caps)
    m = len(row)
    arcs = np.arange(m)
    equal = sparse.csr_matrix((np.ones(m), (row, arcs)), shape=(n, m))
    bounded = col < slots - 1
    upper = sparse.vstack([
        sparse.csr_matrix((np.ones(bounded.sum()), (col[bounded], arcs[bounded])), shape=(slots - 1, m)),
        sparse.csr_matrix((1.0 / height[row[bounded]], (col[bounded], arcs[bounded])), shape=(slots - 1, m)),
    ])
    limits = np.concatenate([capacity_blocks * widths, capacity_seqs * widths])
    result = linprog(cost, A_ub=upper, b_ub=limits, A_eq=equal, b_eq=area, bounds=np.column_stack([np.zeros(m), cap]),
                     method="highs", options={} if time_limit_s is None else {"time_limit": float(time_limit_s)})
    if result.status == 1:  # the iteration or time limit
        return None
    if result.status != 0:
        raise RuntimeError(f"the KV fluid LP was not solved to optimality: {result.message}")
    return float(result.fun)


def kv_wait_bound_ms(problem: "PlacementProblem", prefill_floor_ms: np.ndarray, decode_ms: np.ndarray | None = None,
                     height_blocks: np.ndarray | None = None, time_limit_s: float | None = None) -> float | None:
    """Mean TTFT lower bound ``(min sum MBD - sum (a_r + L_r / 2)) / n + mean_r min_k f_rk`` (module docstring), or
    None when the LP would exceed ``MAX_ARCS`` request-slot variables or is not solved within ``time_limit_s``.

    ``decode_ms`` (per request, first token to completion) and ``height_blocks`` replace the floors ``(O_r - 1) d_rk``
    and ``h_r``: given a run's realised values (benchmarks/bench_placement.py) the value is no longer a bound on every
    schedule but measures how much of a gap the floors leave (the hold becomes ``min_k f_rk + decode_ms``)."""
    q = problem.requests
    n = len(q)
    if n * (GRID_SLOTS + 1) > MAX_ARCS:
        return None
    height = (own_blocks(problem) if height_blocks is None else height_blocks).astype(float)
    floor = prefill_floor_ms.min(axis=1)
    hold = hold_floor_ms(problem, prefill_floor_ms) if decode_ms is None else floor + decode_ms
    capacity_blocks = float(sum(e.kv_capacity_blocks for e in problem.engines))
    capacity_seqs = float(sum(e.max_running_seqs for e in problem.engines))
    busy_dates = fluid_mean_busy_dates_ms(q.arrival_ms.astype(float), height, hold, capacity_blocks, capacity_seqs, time_limit_s)
    if busy_dates is None:
        return None
    wait = max(0.0, busy_dates - float((q.arrival_ms + hold / 2).sum()))
    return wait / n + float(floor.mean())
