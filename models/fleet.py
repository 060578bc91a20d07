"""Fleet provisioning as a Pyomo MILP over length classes and pool options (FleetOpt, Chen et al. 2026).

Sets: classes k (milp_data.py), pool options j (windows), floor levels m of
pool j, small instance counts q < N_j of pool j (the Erlang-C table).

Variables
    x[k,j] in [0,1]     share of class k served by pool j uncompressed (only if the class fits C_j)
    z[k,j] in [0,p_c]   share of class k compressed to C_j and served by j (band classes, L_out < C_j)
                        (neither exists for a pool with no floor level under the SLO: it cannot open;
                        a class no other pool holds then gets the empty row 0 = 1, reported infeasible)
    n[j] integer in [0, gpu_bound[j]]   GPUs (instances) of pool j;   open[j] binary: pool j is used
    level[j,m] binary   pool j's P99 TTFT floor level: its floor is at most (m+1) t_j
    count[j,q] binary   pool j has exactly q GPUs, 1 <= q < N_j;   big[j] binary: n[j] >= N_j
                        (an open pool has at least one GPU)

Constraints (equation numbers refer to this docstring)
    (1) route[k]        sum_j x[k,j] + sum_j z[k,j] = 1   (= served under the served objective)
   (1') compress_share[k]  sum_j z[k,j] <= p_c          (p_c served)
    (2) load_definition[j]  a_j = load_erlangs[j] = sum_k L[k,j] x[k,j] + L'[k,j] z[k,j]   (erlangs)
    (3) utilisation_cap[j]  a_j <= rho_max n_max_j n[j]
    (4) floor[j,m]      sum_k (A[k,m] - e_jm p_k) x + (A'[k,j,m] - e_jm p_k) z <= M_jm (1 - sum_{m'<=m} level[j,m'])
                        (paper rule: A = mass above m chunks, e = 0.01: at most 1 % of the pool's traffic has a
                        floor above the level; fleetsim rule: A = chunk mass, e = the level's top in mean chunks;
                        optfleet/problems/fleet/milp_data.py;
                        the excess falls with m, so a pool at level m' <= m meets row m too;
                        M_jm = the largest excess any routing can reach, rows with M_jm <= 0 dropped;
                        every pool picks a level, open or not, so the top row holds outright)
    (5) one level, one count:  sum_m level[j,m] = 1,  sum_q count[j,q] + big[j] = open[j]
                        (a pool with no level under the SLO cannot open)
    (6) n[j] = sum_q q count[j,q] + nbig, nbig in [N_j big[j], gpu_bound[j] big[j]]
                        (gpu_bound: enough for any routing's load, widened for the user constraints that
                        need more: optfleet/problems/fleet/constraints.py gpu_bounds)
  (6') opening rows     x_open: x[k,j] <= open[j],  z_open: z[k,j] <= p_c open[j],  n_open: n[j] <= gpu_bound[j] open[j]
    (7) wait[j,m]       a_j <= sum_q a_max[j,q,m] count[j,q] + r_j nbig[j] + D_jm (1 - level[j,m])
                        (below N_j GPUs the Erlang-C limit of the chosen count; from N_j on the
                        cap r_j n = rho_max n_max n implies W99 = 0; D_jm = max_q (r_j q - a_max[j,q,m])
                        relaxes the row exactly to the cap when another level is chosen; a_max at the level's
                        floor f_jm: exact under the paper rule, one end of the level's interval under the
                        fleetsim rule, whose restriction and relaxation the driver solves).
                        Under the batching model the per-GPU cap depends on the level (``data.gpu_caps``, the
                        no-wait iteration time at level m within the SLO; milp_data.py ``level_caps``) and
                        D_jm adds (r_j - cap_jm) gpu_bound[j] so another level's row still relaxes to (3)
    (8) max_pools       sum_j open[j] <= K
  (11), (12), (7')      optional moment-ratio levels (``ratio_levels``, models/fleet_moments.py): the Erlang table
                        as a table in load and R_j = E[S^2]/E[S], a level binary per interval of R_j's grid
  (13), (14), (15)      the engine batching relaxation's work levels (``data.work_levels``, models/fleet_work_levels.py):
                        row (3)'s cycle column plus the prefill hold, at the level of the GPU time per GPU
    cost                cost = sum_j price_j n[j]   ($/hour)

Each family is one function below (``add_*``); :func:`build` lists them in
order.  Two choices swap families by name:

* the objective (``OBJECTIVES``, models/fleet_objectives.py): ``cost``
  (min cost, every request served) or ``served`` (a budget cap: max the
  admitted share ``served``, rows (1), (1') and (9c) admit ``served``);
* the routing mode (``ROUTING``, models/fleet_routing.py, rows (9)-(10)):
  ``split`` (any shares), ``threshold`` (each length segment's uncompressed
  share goes to one pool, pools in window order along L, each pool's
  compressed classes a prefix of its band at p_c), and ``sweep`` (the
  sweep's policy space: threshold, K = 2 with the long pool, every segment
  to the smallest open pool that holds it, compression bands ending on the
  gamma grid) -- restricted that far the model must reproduce the sweep's
  optimum.  As in the sweep's plans, the long pool may stay empty (then it
  is closed and does not count against K: with K = 1 a single short pool
  holding every request is allowed).

The model records both (``m.objective_name``, ``m.routing``) and its declared
user constraints (``m.user_constraints``, models/constraints.py), so drivers
ask the families, not the components.  :func:`extract` returns the solution
in numbers (:class:`FleetSolution`; the driver makes it a Plan) and
:func:`warm_start` loads any threshold plan as a MIP start.

The Erlang table a_max depends on each pool's ``R_j = E[S^2]/E[S]``; it is
passed in and refreshed by the driver (optfleet/problems/fleet/milp.py) from the evaluator
(under the batching model the driver passes its own tables, milp_batching.py).  (Pyomo reserves the
name ``load`` on blocks, hence ``m.load_erlangs``.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyomo.environ as pyo
from numpy.typing import NDArray
from optfleet.models.constraints import COST, start_user_constraints
from optfleet.models.fleet_moments import RatioLevels, add_ratio_level_rows, ratio_tables, start_ratio_levels
from optfleet.models.fleet_work_levels import add_work_level_rows, graded_options_of, start_work_levels
from optfleet.models.fleet_objectives import OBJECTIVES
from optfleet.models.fleet_routing import ROUTING
from optfleet.models.linear import weighted

from optfleet.errors import InputError
from optfleet.queueing import erlang_tables

if TYPE_CHECKING:
    from optfleet.problems.fleet.milp_data import FleetMilpData


@dataclass(frozen=True)
class ShareIndex:
    """Which shares exist: the (class, pool) pairs of ``x`` (the class fits the pool) and ``z`` (it can be
    compressed into it), both only for pools with a floor level under the SLO, by pool and by class."""

    fit: list[tuple[int, int]]
    compressed: list[tuple[int, int]]
    x_of: dict[int, list[int]]
    z_of: dict[int, list[int]]
    fits_into: dict[int, list[int]]
    compressible_into: dict[int, list[int]]


def share_index(data: FleetMilpData) -> ShareIndex:
    """The shares of ``data``'s model (a pool option with no floor level under the SLO cannot open: no shares)."""
    classes, pools = range(len(data.mass)), range(len(data.pools))
    usable = [data.pools[j].levels > 0 for j in pools]
    fit = [(k, j) for k in classes for j in pools if data.fits[k, j] and usable[j]]
    compressed = [(k, j) for k in classes for j in pools if data.can_compress[k, j] and usable[j]]
    return ShareIndex(
        fit, compressed,
        x_of={j: [k for k, jj in fit if jj == j] for j in pools},
        z_of={j: [k for k, jj in compressed if jj == j] for j in pools},
        fits_into={k: [j for kk, j in fit if kk == k] for k in classes},
        compressible_into={k: [j for kk, j in compressed if kk == k] for k in classes},
    )


def service_gpu_bounds(data: FleetMilpData) -> np.ndarray:
    """Instances of each pool option that carry any routing's load: ``ceil(a_max_j / r_j) + N_j + 1``.

    ``a_max_j`` is the load of every class pool j can hold (compressed or not) and ``r_j`` the least positive load
    per GPU any floor level allows (``rho_max n_max_j``; under the batching model the least positive level cap,
    ``FleetMilpData.gpu_caps``); with the engine relaxation's work levels (models/fleet_work_levels.py) ``a_max_j``
    adds the largest prefill hold, so row (15) holds at every level too.  At that many instances the cap (3) holds
    for every routing and, being at least the table size ``N_j``, so do the wait rows (7).  A plan never needs more
    for its own traffic; user constraints may need more (``optfleet.problems.fleet.constraints.gpu_bounds``).
    """
    problem = data.problem
    max_load = [max(data.load[:, j][data.fits[:, j]].sum(), 0.0) + data.compressed_load[:, j].sum() for j in range(len(data.pools))]
    for j in graded_options_of(data):
        max_load[j] += data.prefill_hold_load[:, j][data.fits[:, j]].sum() + data.compressed_prefill_hold_load[:, j].sum()
    per_gpu = []
    for j, o in enumerate(data.pools):
        caps = data.gpu_caps(j)
        per_gpu.append(float(caps[caps > 0].min()) if np.any(caps > 0) else problem.rho_max * o.slots_per_instance)
    return np.array([int(np.ceil(max_load[j] / per_gpu[j])) + o.table_instances + 1 for j, o in enumerate(data.pools)])


def build(
    data: FleetMilpData, ratio_ms: np.ndarray, routing: str = "split", max_pools: int = 2, gpu_bounds: np.ndarray | None = None,
    objective: str = COST, wait_tables: list[np.ndarray] | None = None, ratio_levels: RatioLevels | None = None,
) -> pyo.ConcreteModel:
    """The MILP of ``data`` with Erlang tables at ``ratio_ms`` (one R_j per pool option), or with ``wait_tables``
    (``[n, level]`` per option, ``n < N_j``: the batching model's, optfleet/problems/fleet/milp_batching.py): the
    families of the module docstring, the objective ``OBJECTIVES[objective]`` and the routing mode ``ROUTING[routing]``.

    ``gpu_bounds[j]`` bounds ``n[j]`` (instances; default :func:`service_gpu_bounds`).  It is the mutable
    Param ``m.gpu_bound``, also the big-M of ``n_open`` and ``nbig_high``: a Python constraint that needs
    more instances in a pool raises it there (``m.gpu_bound[j] = 500``) before the solve.

    ``ratio_levels`` (models/fleet_moments.py) replaces a graded pool's single table at ``ratio_ms[j]`` by one table per
    interval of its ``E[S^2]/E[S]`` grid, chosen by rows (11), (12).
    """
    if routing not in ROUTING:
        raise ValueError(f"routing must be one of {tuple(ROUTING)}")
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {tuple(OBJECTIVES)}")
    if routing == "sweep" and data.problem.heterogeneous:
        raise InputError("solve.routing", routing, "the sweep's policy space has one GPU configuration; use threshold or split with a gpu_catalog")
    goal = OBJECTIVES[objective]
    m = pyo.ConcreteModel(name=f"fleet:{data.problem.name}")
    m.data = data
    m.routing = routing
    m.objective_name = objective
    m.share_index = share_index(data)
    m.user_constraints = []
    add_share_vars(m)
    add_gpu_vars(m, service_gpu_bounds(data) if gpu_bounds is None else np.asarray(gpu_bounds))
    goal.route_rows(m)
    add_load_rows(m)
    add_utilisation_cap(m)
    add_work_level_rows(m)
    if data.prefill_capacity is not None:
        add_mean_tpot_rows(m)
    goal.compress_share_rows(m)
    add_opening_rows(m)
    add_floor_rows(m)
    add_level_and_count_choice(m)
    add_gpu_count_link(m)
    m.wait_tables = (erlang_tables(data.pools, ratio_ms, data.problem.ttft_p99_ms, data.problem.rho_max, data.problem.ttft_quantile)
                     if wait_tables is None else wait_tables)
    m.ratio_levels = ratio_levels
    m.ratio_tables = {}
    if ratio_levels is not None:
        if wait_tables is not None:
            raise ValueError("moment-ratio levels build their own Erlang tables: pass ratio_levels or wait_tables, not both")
        m.ratio_tables = ratio_tables(m, ratio_levels)
        for j, table in m.ratio_tables.items():
            m.wait_tables[j] = table[:, :, 0]  # the largest of a graded pool's tables: what holds at every ratio level
        add_ratio_level_rows(m, ratio_levels)
    add_wait_rows(m)
    add_pool_limit(m, max_pools)
    add_cost(m)
    goal.objective(m)
    ROUTING[routing].add_rows(m)
    return m


def add_share_vars(m: pyo.ConcreteModel) -> None:
    """``x[k,j]`` in [0, 1] where class k fits pool j, ``z[k,j]`` in [0, p_c] where it can be compressed into j."""
    m.x = pyo.Var(m.share_index.fit, bounds=(0, 1))
    m.z = pyo.Var(m.share_index.compressed, bounds=(0, m.data.problem.compressible_fraction))


def add_gpu_vars(m: pyo.ConcreteModel, bounds: np.ndarray) -> None:
    """``gpu_bound[j]`` (mutable), ``n[j]``, ``open[j]``, the floor levels ``level[j,m]``, the small counts
    ``count[j,q]`` (``1 <= q < N_j``), ``big[j]`` and ``nbig[j]`` (rows (5), (6))."""
    data = m.data
    pools = range(len(data.pools))
    m.gpu_bound = pyo.Param(pools, mutable=True, within=pyo.NonNegativeIntegers, initialize=lambda _, j: int(bounds[j]))
    m.n = pyo.Var(pools, domain=pyo.NonNegativeIntegers, bounds=lambda m, j: (0, m.gpu_bound[j]))
    m.open = pyo.Var(pools, domain=pyo.Binary)
    m.level = pyo.Var([(j, lv) for j in pools for lv in range(data.pools[j].levels)], domain=pyo.Binary)
    m.count = pyo.Var([(j, q) for j in pools for q in range(1, data.pools[j].table_instances)], domain=pyo.Binary)
    m.big = pyo.Var(pools, domain=pyo.Binary)
    m.nbig = pyo.Var(pools, domain=pyo.NonNegativeIntegers, bounds=lambda m, j: (0, m.gpu_bound[j]))


def add_load_rows(m: pyo.ConcreteModel) -> None:
    """(2) ``load_definition[j]: load_erlangs[j] = sum_k L[k,j] x[k,j] + L'[k,j] z[k,j]``: one load variable per
    pool, so the cap and the wait rows carry one coefficient instead of every class's."""
    data, index = m.data, m.share_index
    m.load_erlangs = pyo.Var(range(len(data.pools)), domain=pyo.NonNegativeReals)
    m.load_definition = pyo.Constraint(
        range(len(data.pools)),
        rule=lambda m, j: m.load_erlangs[j] == weighted(m.x, index.x_of[j], j, data.load[:, j]) + weighted(m.z, index.z_of[j], j, data.compressed_load[:, j]),
    )


def add_utilisation_cap(m: pyo.ConcreteModel) -> None:
    """(3) ``utilisation_cap[j]: load_erlangs[j] <= rho_max n_max_j n[j]``."""
    data = m.data
    m.utilisation_cap = pyo.Constraint(
        range(len(data.pools)), rule=lambda m, j: m.load_erlangs[j] <= data.problem.rho_max * data.pools[j].slots_per_instance * m.n[j]
    )


def add_mean_tpot_rows(m: pyo.ConcreteModel) -> None:
    """(3') ``mean_tpot[j]: sum_k P[k,j] x[k,j] + P'[k,j] z[k,j] <= (1 - t_w,j / T) n[j]``: the prefill compute routed
    to pool j (instance-seconds per second) leaves its decode steps a mean TPOT within the target (pool_stats.py)."""
    data, index = m.data, m.share_index
    m.mean_tpot = pyo.Constraint(
        range(len(data.pools)),
        rule=lambda m, j: weighted(m.x, index.x_of[j], j, data.prefill_load[:, j]) + weighted(m.z, index.z_of[j], j, data.compressed_prefill_load[:, j])
        <= float(data.prefill_capacity[j]) * m.n[j],
    )


def add_opening_rows(m: pyo.ConcreteModel) -> None:
    """(6') A closed pool carries nothing: ``x_open: x[k,j] <= open[j]``, ``z_open: z[k,j] <= p_c open[j]``,
    ``n_open: n[j] <= gpu_bound[j] open[j]``."""
    pc = m.data.problem.compressible_fraction
    m.x_open = pyo.Constraint(m.share_index.fit, rule=lambda m, k, j: m.x[k, j] <= m.open[j])
    m.z_open = pyo.Constraint(m.share_index.compressed, rule=lambda m, k, j: m.z[k, j] <= pc * m.open[j])
    m.n_open = pyo.Constraint(range(len(m.data.pools)), rule=lambda m, j: m.n[j] <= m.gpu_bound[j] * m.open[j])


def add_floor_rows(m: pyo.ConcreteModel) -> None:
    """(4) ``floor[j,m]``: pool j's floor measure stays within level m's allowance per unit of its mass
    (``pool_mass[j]``) unless the pool's level is above m; the big-M is the largest excess any routing can put
    into the pool.  Paper rule: at most 1 % of the traffic has a floor above the level (measure: mass above m
    chunks, allowance 0.01); fleetsim rule: the mean chunks are at most the level's top (measure: chunk mass,
    allowance the top); optfleet/problems/fleet/milp_data.py."""
    data, index = m.data, m.share_index
    pools = range(len(data.pools))

    def floor_rule(m, j, lv):
        x_of, z_of = index.x_of[j], index.z_of[j]
        excess = np.zeros((2, len(data.mass)))
        excess_x, excess_z = data.floor_excess(j, lv)
        excess[0, x_of], excess[1, z_of] = excess_x[x_of], excess_z[z_of]
        # Tightest big-M: the largest excess any routing can put into pool j (each class at most once).
        big_m = float(np.maximum(excess.max(axis=0), 0.0).sum())
        if big_m <= 0:
            return pyo.Constraint.Skip
        measure = weighted(m.x, x_of, j, data.floor_measure[:, lv]) + weighted(m.z, z_of, j, data.compressed_floor_measure[:, j, lv])
        return measure - data.floor_allowance[j, lv] * m.pool_mass[j] <= big_m * (1 - sum(m.level[j, low] for low in range(lv + 1)))

    m.pool_mass = pyo.Var(pools, domain=pyo.NonNegativeReals)
    m.pool_mass_definition = pyo.Constraint(
        pools, rule=lambda m, j: m.pool_mass[j] == weighted(m.x, index.x_of[j], j, data.mass) + weighted(m.z, index.z_of[j], j, data.mass)
    )
    m.floor = pyo.Constraint(list(m.level.keys()), rule=floor_rule)


def add_level_and_count_choice(m: pyo.ConcreteModel) -> None:
    """(5) ``one_level[j]: sum_m level[j,m] = 1`` (``open[j] = 0`` for a pool with no level under the SLO) and
    ``one_count[j]: sum_q count[j,q] + big[j] = open[j]``."""
    options = m.data.pools
    pools = range(len(options))
    m.one_level = pyo.Constraint(
        pools, rule=lambda m, j: sum(m.level[j, lv] for lv in range(options[j].levels)) == 1 if options[j].levels else m.open[j] == 0
    )
    m.one_count = pyo.Constraint(pools, rule=lambda m, j: sum(m.count[j, q] for q in range(1, options[j].table_instances)) + m.big[j] == m.open[j])


def add_gpu_count_link(m: pyo.ConcreteModel) -> None:
    """(6) ``count_link[j]: n[j] = sum_q q count[j,q] + nbig[j]``, ``nbig_low``/``nbig_high``:
    ``N_j big[j] <= nbig[j] <= gpu_bound[j] big[j]``."""
    options = m.data.pools
    pools = range(len(options))
    m.count_link = pyo.Constraint(pools, rule=lambda m, j: m.n[j] == sum(q * m.count[j, q] for q in range(1, options[j].table_instances)) + m.nbig[j])
    m.nbig_low = pyo.Constraint(pools, rule=lambda m, j: m.nbig[j] >= options[j].table_instances * m.big[j])
    m.nbig_high = pyo.Constraint(pools, rule=lambda m, j: m.nbig[j] <= m.gpu_bound[j] * m.big[j])


def add_wait_rows(m: pyo.ConcreteModel) -> None:
    """(7) ``wait[j,m]``: the table ``m.wait_tables[j]`` of pool j (the Erlang-C table at ``R_j``,
    optfleet.queueing.erlang_tables) for the chosen count and level; the cap ``r_j = rho_max n_max_j`` per GPU
    from ``N_j`` GPUs on.  With moment-ratio levels (models/fleet_moments.py) a graded pool gets rows (7') instead,
    ``wait_by_ratio[j,m,l]``, one per floor level and ratio level, off unless both are chosen."""
    graded = set(m.ratio_tables) if m.ratio_levels is not None else set()
    m.wait = pyo.Constraint([key for key in m.level.keys() if key[0] not in graded],
                            rule=lambda m, j, lv: _wait_row(m, j, lv, m.wait_tables[j][:, lv], 1 - m.level[j, lv]))
    if graded:
        keys = [(j, lv, r) for j, lv in m.level.keys() if j in graded for r in range(m.ratio_tables[j].shape[2])]
        m.wait_by_ratio = pyo.Constraint(
            keys, rule=lambda m, j, lv, r: _wait_row(m, j, lv, m.ratio_tables[j][:, lv, r], 2 - m.level[j, lv] - m.ratio_level[j, r]))


def _wait_row(m: pyo.ConcreteModel, j: int, lv: int, column: np.ndarray, off: Any) -> Any:
    """``a_j <= sum_q column[q] count[j,q] + cap_j nbig[j] + D off``: pool j's load within the table ``column`` (one
    entry per instance count ``q < N_j``) at floor level ``lv``, relaxed to the cap (3) when ``off >= 1``."""
    data = m.data
    counts = range(1, data.pools[j].table_instances)
    per_gpu_cap = data.problem.rho_max * data.pools[j].slots_per_instance
    level_cap = float(data.gpu_caps(j)[lv])
    values = column.tolist()
    table_load = sum(values[q] * m.count[j, q] for q in counts)
    slack = max((per_gpu_cap * q - values[q] for q in counts), default=0.0)
    # Another level chosen: the row relaxes to the cap (3); a level cap below it needs (cap - level cap) per GPU more.
    slack = slack + (per_gpu_cap - level_cap) * m.gpu_bound[j] if level_cap < per_gpu_cap else slack
    return m.load_erlangs[j] <= table_load + level_cap * m.nbig[j] + slack * off


def add_pool_limit(m: pyo.ConcreteModel, max_pools: int) -> None:
    """(8) ``max_pools: sum_j open[j] <= K``."""
    m.max_pools = pyo.Constraint(expr=sum(m.open[j] for j in range(len(m.data.pools))) <= max_pools)


def add_cost(m: pyo.ConcreteModel) -> None:
    """``cost = sum_j price_j n[j]`` ($/hour), the expression the objectives and user constraints use."""
    options = m.data.pools
    m.cost = pyo.Expression(expr=sum(options[j].cost_per_instance_hour * m.n[j] for j in range(len(options))))


# ---------------------------------------------------------------- pools closed by open[j] = 0


def closed_pool_variables(m: pyo.ConcreteModel, j: int) -> list[pyo.Var]:
    """The variables of pool option j that are 0 in every solution with ``open[j] = 0``.

    ``open``, ``n``, ``count``, ``big``, ``nbig`` (rows (5), (6), (6')), the shares ``x``, ``z`` and so
    ``load_erlangs``, ``pool_mass`` (rows (2), (4)), and the routing mode's own
    (``ROUTING[m.routing].closed_variables``).  The floor levels are not among them (a closed pool meets
    every level).
    """
    variables = [m.open[j], m.n[j], m.big[j], m.nbig[j], m.load_erlangs[j], m.pool_mass[j]]
    variables += [m.count[j, q] for q in range(1, m.data.pools[j].table_instances)]
    variables += [var for (_, jj), var in m.x.items() if jj == j] + [var for (_, jj), var in m.z.items() if jj == j]
    return variables + ROUTING[m.routing].closed_variables(m, j)


def closing_rows(m: pyo.ConcreteModel) -> list[pyo.Constraint]:
    """The rows by which ``open[j] = 0`` puts :func:`closed_pool_variables` at 0 (a customisation that
    deactivates any of them voids that list)."""
    rows = [m.x_open, m.z_open, m.n_open, m.one_count, m.nbig_high, m.load_definition, m.pool_mass_definition]
    return rows + ROUTING[m.routing].closing_rows(m)


# ---------------------------------------------------------------- solutions out, plans in


@dataclass(frozen=True)
class FleetSolution:
    """A solved model in numbers (the driver, optfleet/problems/fleet/milp_plan.py, makes it a Plan).

    ``instances[j]``: instances of pool option j, 0 when closed; ``served``: the admitted share; ``shares``
    and ``compressed`` ``[k, j]``: the values of ``x[k,j]`` and ``z[k,j]`` (of all traffic) in the open
    pools, 0 elsewhere and where the model has no such share; ``routing``: the routing mode solved.
    """

    instances: NDArray[np.int64]
    served: float
    shares: NDArray[np.float64]
    compressed: NDArray[np.float64]
    routing: str


def extract(m: pyo.ConcreteModel) -> FleetSolution:
    """The solution of a solved model; a pool opened with 0 GPUs carries no load (row (3)) and counts as closed."""
    data: FleetMilpData = m.data
    pools = range(len(data.pools))
    instances = np.array([int(round(pyo.value(m.n[j]))) if pyo.value(m.open[j]) > 0.5 else 0 for j in pools], dtype=np.int64)
    shares = np.zeros((len(data.mass), len(data.pools)))
    compressed = np.zeros_like(shares)
    for j in np.flatnonzero(instances):
        shares[:, j], compressed[:, j] = pool_shares(m, int(j))
    return FleetSolution(instances, OBJECTIVES[m.objective_name].served_share(m), shares, compressed, m.routing)


def _option_index(data: FleetMilpData) -> dict[tuple[str, int], int]:
    return {(o.gpu, o.window_tokens): j for j, o in enumerate(data.pools)}


def _option_key(data: FleetMilpData, pool: Any) -> tuple[str, int]:
    return (pool.gpu or data.problem.hardware.label, pool.window_tokens)


def can_warm_start(m: pyo.ConcreteModel, plan: Any) -> bool:
    """Whether :func:`warm_start` can load ``plan``: threshold routing, at most K pools, every pool with GPUs an
    option the model keeps (one with a floor level under the SLO) and within its ``gpu_bound``."""
    index = _option_index(m.data)

    def loadable(pool: Any) -> bool:
        j = index.get(_option_key(m.data, pool))
        return j is not None and (pool.instances == 0 or (m.data.pools[j].levels > 0 and pool.instances <= pyo.value(m.gpu_bound[j])))

    return plan.rules is None and len(plan.pools) <= pyo.value(m.max_pools.upper) and all(loadable(p) for p in plan.pools)


def warm_start(m: pyo.ConcreteModel, plan: Any) -> None:
    """Load a threshold plan (a fleet ``Plan``, e.g. the sweep's: pools with ``gpu``, ``window_tokens`` and
    ``gpus``, and ``gamma``) as the MIP start; every variable gets a value.

    Each class follows the plan's rule (smallest pool window holding it, the gamma band compressed at p_c);
    the floor level is the lowest the routing meets, the count binaries follow the plan's instance counts, the
    objective, the routing mode and each user constraint start their own variables.  Plans with split
    rules, or with pools the model has no option for, are not loaded: check :func:`can_warm_start` first
    (the caller then solves cold).
    """
    data: FleetMilpData = m.data
    pc = data.problem.compressible_fraction
    for var in m.component_data_objects(pyo.Var):
        var.set_value(0)
    OBJECTIVES[m.objective_name].start(m)
    index = _option_index(data)
    windows = [p.window_tokens for p in plan.pools]
    chosen = [index[_option_key(data, p)] for p in plan.pools]
    for pool, j in zip(plan.pools, chosen, strict=True):
        if pool.instances == 0:
            continue  # a 0-GPU pool carries nothing: closed in the model, which opens pools with >= 1 GPU
        m.open[j].set_value(1)
        m.n[j].set_value(pool.instances)
        if pool.instances < data.pools[j].table_instances:
            m.count[j, pool.instances].set_value(1)
        else:
            m.big[j].set_value(1)
            m.nbig[j].set_value(pool.instances)
    routing = ROUTING[m.routing]
    for k in range(len(data.mass)):
        top = int(data.class_total_to[k])
        home = next(j for w, j in zip(windows, chosen, strict=True) if w >= top)
        below = [(w, j) for w, j in zip(windows, chosen, strict=True) if w < top]
        squeezed = below[-1][1] if below and (k, below[-1][1]) in m.z and top <= plan.gamma * below[-1][0] + 1e-9 else None
        if squeezed is not None:
            m.z[k, squeezed].set_value(pc)
            m.x[k, home].set_value(1 - pc)
        else:
            m.x[k, home].set_value(1)
        routing.start(m, k, home, squeezed)
    for j in range(len(data.pools)):
        if j not in chosen:
            if data.pools[j].levels:
                m.level[j, 0].set_value(1)  # a closed pool carries nothing: every level holds
            continue
        x, z = pool_shares(m, j)
        m.load_erlangs[j].set_value(float(np.dot(data.load[:, j], x) + np.dot(data.compressed_load[:, j], z)))
        m.pool_mass[j].set_value(float(np.dot(data.mass, x + z)))
        level = lowest_floor_level(data, j, x, z)
        if level is not None:
            m.level[j, level].set_value(1)
    start_ratio_levels(m)
    start_work_levels(m)
    start_user_constraints(m)


def fix_plan_counts(m: pyo.ConcreteModel, plan: Any) -> None:
    """Fix ``n[j]`` and ``open[j]`` of every pool option at ``plan``'s instance counts (0 and closed for the options the
    plan does not use): solving the model then finds the plan's routing, floor levels and count binaries.  A plan pool
    the model has no option for is an error (check :func:`can_warm_start`'s conditions first)."""
    index = _option_index(m.data)
    counts = {index[_option_key(m.data, pool)]: pool.instances for pool in plan.pools if pool.instances > 0}
    for j in range(len(m.data.pools)):
        if counts.get(j, 0) > pyo.value(m.gpu_bound[j]):
            m.gpu_bound[j] = counts[j]  # a plan beyond the bounds (certified by its cost, optfleet/problems/fleet/milp.py)
        m.n[j].fix(counts.get(j, 0))
        m.open[j].fix(1 if j in counts else 0)


def pool_shares(m: pyo.ConcreteModel, j: int) -> tuple[np.ndarray, np.ndarray]:
    """The current values of pool j's uncompressed and compressed shares, ``x[:, j]`` and ``z[:, j]``, 0 where absent."""
    classes = range(len(m.data.mass))
    x = np.array([pyo.value(m.x[k, j]) if (k, j) in m.x else 0.0 for k in classes])
    z = np.array([pyo.value(m.z[k, j]) if (k, j) in m.z else 0.0 for k in classes])
    return x, z


def lowest_floor_level(data: FleetMilpData, j: int, x: np.ndarray, z: np.ndarray) -> int | None:
    """The lowest floor level m whose row (4) the shares meet (pool j's floor measure within the level's allowance);
    None if none."""
    for lv in range(data.pools[j].levels):
        excess_x, excess_z = data.floor_excess(j, lv)
        if float(np.dot(excess_x, x) + np.dot(excess_z, z)) <= 1e-12:
            return lv
    return None
