"""Moment-ratio levels of the fleet MILP (models/fleet.py): the Erlang table as a two-dimensional table in load and
``R_j = E[S^2]/E[S]``, so that its wait rows hold at the moments of the routing the model chooses.

A pool's ``R_j = M2_j / M1_j`` is a ratio of two linear forms of its shares:

    M1_j = load_erlangs[j] = sum_k L[k,j] x[k,j] + L'[k,j] z[k,j]           (erlangs, row (2))
    M2_j = second_moment[j] = sum_k Q[k,j] x[k,j] + Q'[k,j] z[k,j]           (erlang-seconds, Q = lambda sum w S^2)

with ``R_j = 1000 M2_j / M1_j`` in ms.  Pool j gets a grid ``g_0 < g_1 < ... < g_L`` (``RatioLevels``) with
``g_0`` at most the least ``m2_k/m1_k`` of a class it can hold and ``g_L`` at least the greatest, so every routing's
``R_j`` lies in some interval ``[g_l, g_{l+1}]`` (a ratio of two linear forms with positive coefficients lies between
the extreme ratios of its terms).  Rows:

    (11) one_ratio_level[j]   sum_l ratio_level[j,l] = 1   (every pool picks one, open or not)
    (12) ratio_row[j,l]       1000 M2_j / g_{l+1} - M1_j <= B_jl (1 - sum_{l' <= l} ratio_level[j,l'])   (l < L - 1)
                              "R_j <= g_{l+1}" once the level is l or below (cumulative, as the floor rows (4));
                              B_jl = sum_k max(1000 Q/g_{l+1} - L, 0) (+ p_c times the compressed terms), the
                              largest excess any routing can reach; the top level's row holds outright
    (7') wait_by_ratio[j,m,l] a_j <= sum_q a_max(q, m, R_l) count[j,q] + r_j nbig[j] + D_jml (2 - level[j,m] - ratio_level[j,l])

``R_l`` is one end of the level's interval: ``g_{l+1}`` (``end = "top"``, the **restriction**) or ``g_l``
(``end = "bottom"``, the **relaxation**).  Both are valid because ``a_max`` falls as R rises: at fixed load ``a`` and
servers ``c``, Kimura's ``W99 = ln(C(c, a)/0.01) R / (2 (c - a))`` (optfleet/queueing/kimura.py; Chen et al. 2026,
FleetOpt) is linear and non-decreasing in R, Erlang C not depending on R, so a load that meets the budget at R meets it
at every R' <= R.  Hence

* restriction: a routing whose ratio is at most ``g_{l+1}`` meets the wait budget at its own R whenever it meets the
  table at ``g_{l+1}``: every plan of the model passes the evaluator's wait rule (a conservative model);
* relaxation: a routing whose ratio lies in ``[g_l, g_{l+1}]`` meeting the rule at its own R meets the table at
  ``g_l``: every plan that meets the rule is feasible in the model at the level of its interval, so its optimum is a
  lower bound on every such plan's cost.

As the grid is refined where the relaxation's plan sits (optfleet/problems/fleet/milp_moments.py), the two meet.
Pools without a grid (``edges_ms[j] is None``: at most one table instance, or no floor level) keep rows (7).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo
from numpy.typing import NDArray
from optfleet.models.linear import weighted

from optfleet.queueing import erlang_tables

RATIO_ENDS = ("top", "bottom")


@dataclass(frozen=True)
class RatioLevels:
    """Per pool option the grid ``g_0 < ... < g_L`` of ``R_j`` in ms (None: the pool keeps its single table), and which
    end of each interval its table is computed at (``"top"``: restriction, ``"bottom"``: relaxation)."""

    edges_ms: tuple[NDArray[np.float64] | None, ...]
    end: str

    def __post_init__(self) -> None:
        if self.end not in RATIO_ENDS:
            raise ValueError(f"end must be one of {RATIO_ENDS}")
        for edges in self.edges_ms:
            if edges is not None and (len(edges) < 2 or np.any(np.diff(edges) <= 0)):
                raise ValueError("a ratio grid needs at least two strictly increasing edges")

    def graded(self) -> list[int]:
        """The pool options with a grid."""
        return [j for j, edges in enumerate(self.edges_ms) if edges is not None]

    def table_ratios_ms(self, j: int) -> NDArray[np.float64]:
        """The R each of pool j's levels computes its table at."""
        edges = self.edges_ms[j]
        return edges[1:] if self.end == "top" else edges[:-1]


def ratio_tables(m: pyo.ConcreteModel, levels: RatioLevels) -> dict[int, NDArray[np.float64]]:
    """Per graded pool j, ``a_max[q, m, l]``: the Erlang table (optfleet.queueing.erlang_tables) at each level's R, all
    computed in one bisection."""
    data, problem = m.data, m.data.problem
    graded = levels.graded()
    ratios = [levels.table_ratios_ms(j) for j in graded]
    options = [data.pools[j] for j, r in zip(graded, ratios, strict=True) for _ in r]
    flat = erlang_tables(options, np.concatenate(ratios) if ratios else np.zeros(0), problem.ttft_p99_ms, problem.rho_max, problem.ttft_quantile)
    tables, start = {}, 0
    for j, r in zip(graded, ratios, strict=True):
        tables[j] = np.stack(flat[start:start + len(r)], axis=2)
        start += len(r)
    return tables


def add_ratio_level_rows(m: pyo.ConcreteModel, levels: RatioLevels) -> None:
    """``second_moment[j]`` and its definition, the level binaries ``ratio_level[j,l]`` and rows (11), (12) for every
    graded pool."""
    data, index = m.data, m.share_index
    graded = levels.graded()
    pc = data.problem.compressible_fraction
    m.second_moment = pyo.Var(graded, domain=pyo.NonNegativeReals)
    m.second_moment_definition = pyo.Constraint(
        graded,
        rule=lambda m, j: m.second_moment[j] == weighted(m.x, index.x_of[j], j, data.second_load[:, j])
        + weighted(m.z, index.z_of[j], j, data.compressed_second_load[:, j]),
    )
    m.ratio_level = pyo.Var([(j, lv) for j in graded for lv in range(len(levels.edges_ms[j]) - 1)], domain=pyo.Binary)
    m.one_ratio_level = pyo.Constraint(graded, rule=lambda m, j: sum(m.ratio_level[j, lv] for lv in range(len(levels.edges_ms[j]) - 1)) == 1)

    def ratio_rule(m, j, lv):
        top = float(levels.edges_ms[j][lv + 1])
        if lv == len(levels.edges_ms[j]) - 2:
            return pyo.Constraint.Skip  # the top level's row holds outright
        excess_x = 1000.0 * data.second_load[:, j] / top - data.load[:, j]
        excess_z = 1000.0 * data.compressed_second_load[:, j] / top - data.compressed_load[:, j]
        big_m = float(np.maximum(excess_x[index.x_of[j]], 0.0).sum() + pc * np.maximum(excess_z[index.z_of[j]], 0.0).sum())
        if big_m <= 0:
            return pyo.Constraint.Skip
        return 1000.0 / top * m.second_moment[j] - m.load_erlangs[j] <= big_m * (1 - sum(m.ratio_level[j, low] for low in range(lv + 1)))

    m.ratio_row = pyo.Constraint(list(m.ratio_level.keys()), rule=ratio_rule)


def ratio_level_of(data, levels: RatioLevels, j: int, x: NDArray[np.float64], z: NDArray[np.float64]) -> int:
    """The lowest ratio level of pool j whose row (12) the shares meet (the first interval whose top is at least R_j)."""
    first = float(np.dot(data.load[:, j], x) + np.dot(data.compressed_load[:, j], z))
    second = float(np.dot(data.second_load[:, j], x) + np.dot(data.compressed_second_load[:, j], z))
    ratio = 1000.0 * second / first if first > 0 else 0.0
    return int(min(np.searchsorted(levels.edges_ms[j][1:], ratio * (1 - 1e-9), side="left"), len(levels.edges_ms[j]) - 2))


def start_ratio_levels(m: pyo.ConcreteModel) -> None:
    """MIP start of rows (11), (12) from the shares already set: ``second_moment[j]`` and pool j's lowest ratio level
    that holds (level 0 for a pool with no traffic)."""
    if m.ratio_levels is None:
        return
    data, levels = m.data, m.ratio_levels
    for j in levels.graded():
        x = np.array([m.x[k, j].value if (k, j) in m.x else 0.0 for k in range(len(data.mass))], dtype=np.float64)
        z = np.array([m.z[k, j].value if (k, j) in m.z else 0.0 for k in range(len(data.mass))], dtype=np.float64)
        m.second_moment[j].set_value(float(np.dot(data.second_load[:, j], x) + np.dot(data.compressed_second_load[:, j], z)))
        chosen = ratio_level_of(data, levels, j, x, z)
        for lv in range(len(levels.edges_ms[j]) - 1):
            m.ratio_level[j, lv].set_value(1 if lv == chosen else 0)
