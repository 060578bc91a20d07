"""Lower bounds on the fleet MILP's cost when only a given set of pool options may open (models/fleet.py).

With the pool options S open, every solution of the model has, per pool j,
``n_j >= a_j / (rho_max s_j)`` (utilisation cap, row 3), so its cost is at least
``sum_j c_j a_j / (rho_max s_j)``, linear in the shares.  Each open pool also meets its floor
row (4) at its top level, which every level meets: ``sum_k e[k,j] x[k,j] + e'[k,j] z[k,j] <= 0``
with ``e`` the class's floor measure at that level less the level's allowance per unit of its mass
(``FleetMilpData.floor_excess``).  Adding ``mu`` times these
rows (``mu >= 0``, a Lagrangian relaxation) and minimising each class over its shares
(``sum_j x + sum_j z = 1``, ``sum_j z <= p_c``, row 1) gives, for every ``mu``,

    LB_mu(S) = sum_k (1 - p_c) min_{j in S} u_mu[k,j] + p_c min(min_{j in S} u_mu[k,j], min_{j in S} w_mu[k,j])
    u_mu[k,j] = c_j L[k,j] / (rho_max s_j) + mu e[k,j],   w_mu[k,j] = c_j L'[k,j] / (rho_max s_j) + mu e'[k,j]

(+inf for a class no option of S holds).  The bound is the largest over a grid of ``mu``.  It
holds for the model with any extra rows (user constraints restrict it) but only for the
objective ``cost``.  It is cheap (numpy over every set at once) and loose: it prices GPUs at the
cap, ignoring Erlang-C waits and whole GPUs.  On the scale benchmark (47 options, K = 3; 9,075 sets
hold every class) the best-first search gave 341 sets an LP relaxation and 3 a MILP solve.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from optfleet.problems.fleet.milp_data import FleetMilpData

MULTIPLIERS = (0.0, *np.logspace(-1, 5, 13))  # mu grid ($/h per unit of excess mass)


def open_set_bounds(data: FleetMilpData, open_sets: NDArray[np.int64]) -> NDArray[np.float64]:
    """``LB(S)`` (module docstring) for every row ``S`` of ``open_sets`` (sets x options per set)."""
    problem = data.problem
    pc = problem.compressible_fraction
    usable = np.array([o.levels > 0 for o in data.pools])
    rate = np.array([o.cost_per_gpu_hour / (problem.rho_max * o.slots_per_gpu) for o in data.pools])
    top_rows = [data.floor_excess(j, max(o.levels - 1, 0)) for j, o in enumerate(data.pools)]
    excess = np.stack([x for x, _ in top_rows], axis=1)
    compressed_excess = np.stack([z for _, z in top_rows], axis=1)
    holds = data.fits & usable
    compresses = data.can_compress & usable
    best = np.full(len(open_sets), -np.inf)
    for mu in MULTIPLIERS:
        u = np.where(holds, data.load * rate + mu * excess, np.inf)[:, open_sets].min(axis=2)
        w = np.where(compresses, data.compressed_load * rate + mu * compressed_excess, np.inf)[:, open_sets].min(axis=2)
        per_class = (pc * np.minimum(u, w) if pc > 0 else 0.0) + ((1 - pc) * u if pc < 1 else 0.0)  # no 0 * inf
        best = np.maximum(best, per_class.sum(axis=0))
    return best
