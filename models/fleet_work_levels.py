"""Work levels of the fleet MILP's batching relaxation under the engine model (models/fleet.py): the cycle row (3)
sharpened by the prefill hold it leaves out, at the level of the GPU time a pool's traffic takes per GPU.

Under the engine model a pool's held iteration is ``t = (base + o) / (1 - q_t)``, ``q_t`` the GPU time its
requests take per unit time on one GPU, so the held slots ``y E[h] >= y A + y (L + 1/2) t`` are not linear in the
routing.  Row (3) with the cycle column (optfleet/problems/fleet/batching_pool.py ``cycle_seconds_per_request``)
multiplies the occupancy cap through by ``1 - q`` and drops ``y A``, the prefill chunks and prompts' compute.  The
work levels keep it: with

    W_j = sum_k V[k,j] x[k,j] + V'[k,j] z[k,j]    (work_load[j], the GPU time, q = W_j / n[j] per GPU)
    P_j = sum_k U[k,j] x[k,j] + U'[k,j] z[k,j]    (prefill_hold_load[j], the slots the prefill hold takes)

(``V = lambda sum w w_i``, ``U = lambda sum w a_i``: ``work_seconds_per_request``, ``prefill_hold_seconds_per_request``)
and pool j's grid ``0 = g_0 < g_1 < ... < g_L = 1`` (``data.work_levels[j]``), the rows are

    (13) one_work_level[j]    sum_l work_level[j,l] = 1   (every graded pool picks one, open or not)
    (14) work_row[j,l]        W_j >= g_l n[j] - g_l gpu_bound[j] (1 - sum_{l' >= l} work_level[j,l'])      (l >= 1)
                              "q >= g_l" once the level is l or above (void below: ``n[j] <= gpu_bound[j]``)
    (15) prefill_hold_row[j,l]  a_j + (1 - g_{l+1}) P_j <= rho_max s_j n[j] + (1 - g_{l+1}) C_j (1 - work_level[j,l])
                              (l < L - 1; C_j the largest P_j any routing gives; the top level's row is (3) itself)

A higher level weakens row (15), so (14) keeps a pool from claiming one above its own GPU time: the level a
solution can take is at most the interval holding its ``q``.

**Why every plan meeting the batching model is feasible.**  Take a pool of the plan with ``n`` GPUs, ``q = W / n``
(below 1: the engine's stability) and l the interval holding it (``g_l <= q <= g_{l+1}``); put its binary at l.
Rows (14) hold at l and below (``g`` falls) and are void above; row (15) at l is ``cycle_seconds_per_request``'s
level inequality at ``g = g_{l+1} >= q`` times ``n``, and the other levels' rows are void (row (3) and
``P_j <= C_j``).  A closed pool takes level 0 (``W = P = 0``).  So the relaxation with these rows still contains every
plan that meets the model, and its bound is a bound; the grid only decides how much of ``y A (1 - q)`` the rows see
(all of it at ``q = g_{l+1}``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyomo.environ as pyo

from optfleet.models.linear import weighted

if TYPE_CHECKING:
    from optfleet.problems.fleet.milp_data import FleetMilpData


def graded_options_of(data: FleetMilpData) -> list[int]:
    """The pool options of ``data`` (a ``FleetMilpData``) with a work-level grid (none without ``data.work_levels``)."""
    levels = data.work_levels
    return [] if levels is None else [j for j, grid in enumerate(levels) if grid is not None]


def add_work_level_rows(m: pyo.ConcreteModel) -> None:
    """``work_load[j]``, ``prefill_hold_load[j]`` and their definitions, the binaries ``work_level[j,l]`` and rows
    (13)-(15) for every graded option (nothing when there is none)."""
    data, index = m.data, m.share_index
    graded = graded_options_of(m.data)
    if not graded:
        return
    pc = data.problem.compressible_fraction
    grids = {j: data.work_levels[j] for j in graded}

    def column(plain: np.ndarray, compressed: np.ndarray, j: int):
        return weighted(m.x, index.x_of[j], j, plain[:, j]) + weighted(m.z, index.z_of[j], j, compressed[:, j])

    def largest(plain: np.ndarray, compressed: np.ndarray, j: int) -> float:
        return float(plain[index.x_of[j], j].sum() + pc * compressed[index.z_of[j], j].sum())

    m.work_load = pyo.Var(graded, domain=pyo.NonNegativeReals)
    m.work_load_definition = pyo.Constraint(graded, rule=lambda m, j: m.work_load[j] == column(data.work_load, data.compressed_work_load, j))
    m.prefill_hold_load = pyo.Var(graded, domain=pyo.NonNegativeReals)
    m.prefill_hold_load_definition = pyo.Constraint(
        graded, rule=lambda m, j: m.prefill_hold_load[j] == column(data.prefill_hold_load, data.compressed_prefill_hold_load, j))
    m.work_level = pyo.Var([(j, lv) for j in graded for lv in range(len(grids[j]) - 1)], domain=pyo.Binary)
    m.one_work_level = pyo.Constraint(graded, rule=lambda m, j: sum(m.work_level[j, lv] for lv in range(len(grids[j]) - 1)) == 1)
    levels = {j: len(grids[j]) - 1 for j in graded}

    def work_rule(m, j, lv):
        floor = float(grids[j][lv])
        return m.work_load[j] >= floor * m.n[j] - floor * m.gpu_bound[j] * (1 - sum(m.work_level[j, high] for high in range(lv, levels[j])))

    def hold_rule(m, j, lv):
        share = 1.0 - float(grids[j][lv + 1])
        cap = data.problem.rho_max * data.pools[j].slots_per_instance
        big_m = share * largest(data.prefill_hold_load, data.compressed_prefill_hold_load, j)
        return m.load_erlangs[j] + share * m.prefill_hold_load[j] <= cap * m.n[j] + big_m * (1 - m.work_level[j, lv])

    m.work_row = pyo.Constraint([(j, lv) for j in graded for lv in range(1, levels[j])], rule=work_rule)
    m.prefill_hold_row = pyo.Constraint([(j, lv) for j in graded for lv in range(levels[j] - 1)], rule=hold_rule)


def start_work_levels(m: pyo.ConcreteModel) -> None:
    """MIP start of rows (13)-(15) from the shares and counts already set: ``work_load[j]``, ``prefill_hold_load[j]``
    and pool j's level, the interval of the grid holding its GPU time per GPU (level 0 for a pool with no traffic)."""
    data = m.data
    for j in graded_options_of(m.data):
        x = np.array([m.x[k, j].value if (k, j) in m.x else 0.0 for k in range(len(data.mass))], dtype=np.float64)
        z = np.array([m.z[k, j].value if (k, j) in m.z else 0.0 for k in range(len(data.mass))], dtype=np.float64)
        work = float(np.dot(data.work_load[:, j], x) + np.dot(data.compressed_work_load[:, j], z))
        m.work_load[j].set_value(work)
        m.prefill_hold_load[j].set_value(float(np.dot(data.prefill_hold_load[:, j], x) + np.dot(data.compressed_prefill_hold_load[:, j], z)))
        grid = data.work_levels[j]
        n = float(m.n[j].value or 0.0)
        chosen = 0 if work <= 0 else int(np.clip(np.searchsorted(grid * n, work * (1 - 1e-12), side="right") - 1, 0, len(grid) - 2))
        for lv in range(len(grid) - 1):
            m.work_level[j, lv].set_value(1 if lv == chosen else 0)
