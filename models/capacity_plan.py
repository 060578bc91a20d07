"""The capacity-plan MILP (kind ``capacity_plan``): GPUs bought per period, reserved / on-demand / spot, shared by
several models.

Notation (optfleet/problems/capacity_plan/): models ``m``, GPU types ``g``, periods ``t``; ``a[m, g, t] = tp[m, g]
n[m, g, t]`` the GPUs model ``m`` needs on type ``g`` in period ``t`` (the fleet kind's least instance count at the
period's rate, capacity.py); ``lambda_m`` the share of a period spent loading the model; prices per GPU-period
``c^O_g``, ``c^S_g`` and ``c^R_g`` per reservation (``upfront + price x hours x term``, paid in full); ``k_g(s)``
the spot GPUs counted at the type's confidence when ``s`` are bought (spot.py).

* :func:`add_assignment`: binaries ``y[m, g, t]``, ``sum_g y[m, g, t] = 1`` for every model and period with demand
  (or a replica floor): each model runs on one type per period; integer instances ``x[m, g, t]`` with
  ``n[m, g, t] y <= x <= U[m, g] y``, ``U[m, g] = max_t n[m, g, t]`` (a model may keep instances warm through a
  dip: clipping ``x`` at ``U`` never adds load, so the bound loses no plan); for a model without load time
  ``x = n y`` (more instances than needed never help it);
* :func:`add_load_charge`: ``l[m, g, t] >= tp[m, g] (x[m, g, t] - x[m, g, t-1])``, ``l >= 0`` (the GPUs that start
  serving the model; ``x[., ., -1] = 0``);
* :func:`add_reserved`: integer starts ``r[g, t]``, held ``R[g, t] = sum_{t - term_g < s <= t} r[g, s] <= cap``;
* :func:`add_on_demand`: integer ``O[g, t]`` in ``[0, cap]``;
* :func:`add_spot`: the survivor table as a staircase: binaries ``z[g, t, j]`` for ``j = 1..cap_t`` with
  ``z[j] >= z[j+1]``, spot bought ``S = sum_j z[j]``, counted ``K = sum_j (k(j) - k(j-1)) z[j]``.  Exactly
  ``k(S)`` at every integer ``S`` (the ``z`` are the first ``S`` steps), with no SOS (HiGHS has none);
* :func:`add_capacity`: ``sum_m u[m, g, t] <= R + P + sum_m w[m, g, t] + O + K`` per type and period, with
  ``u = tp x + lambda_m l`` a model's GPUs in use, ``P[g, t]`` the unpinned GPUs already held and ``w[m, g, t] <=
  min(u[m, g, t], Q[m, g, t])`` (continuous) the GPUs held pinned to model ``m`` that it uses (held.py; at an
  optimum ``w`` is the minimum, the evaluator's ``held_usable``).  Since ``R``, ``O`` and ``K`` are integers this
  is ``ceil(use - R - A - O) <= k(S)`` with ``A = P + sum_m min(u, Q)``: the spot GPUs relied on survive with
  probability at least the confidence (exactly the evaluator's rule; the chance holds per type and period);
* :func:`add_residual_capacity`: valid rows that cut off split assignments, ``sum_{X in S} X >= sum_m (a[m, g, t] +
  b - D)^+ y[m, g, t]`` for each set ``S`` of a type's purchase options whose complement is capped at ``D`` GPUs
  (``b``: the GPUs of the models with no other type); they remove no integer plan;
* :func:`add_load_rounding`: valid rows that price a load in whole GPUs, ``E[g, t] >= y[m, g, t] - y[m, g, t-1]`` and
  ``E[g, t] >= y[m, g, t] - (x[m, g, t-1] - n[m, g, t-1] y[m, g, t-1]) / (n[m, g, t] - n[m, g, t-1])`` with ``E`` the
  type's GPUs held less those its instances hold: a model that starts instances needs a whole spare GPU for their
  load; they remove no integer plan;
* :func:`add_budget`, :func:`add_gpu_mix`: ``cost <= B``; ``min_share sum_g H <= H_g <= max_share sum_g H``
  with ``H = R + P + sum_m Q + O + S`` the GPUs held, in every period;
* objective ``min sum_gt c^R_g r + c^O_g O + c^S_g S`` (the reservations already held are sunk: not in it).

Exact for the stated policy space: one GPU type per model per period, spot counted at the binomial quantile, load
time as a fluid share of a GPU-period (plan.gpus_in_use).  Its optimum equals the least evaluator cost over every
schedule the evaluator finds feasible (tests/test_capacity_plan.py checks this by brute force).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np
import pyomo.environ as pyo

from optfleet.models.linear import scaled

if TYPE_CHECKING:
    from optfleet.problems.capacity_plan.plan import Schedule
    from optfleet.problems.capacity_plan.problem import CapacityProblem

NOT_RUNNING = -1
"""The GPU type of a model in a period without instances (plan.NO_TYPE)."""


def build(problem: CapacityProblem, constraints: bool = True, reserved_before: np.ndarray | None = None,
          instances_before: np.ndarray | None = None, load_rounding: bool = True) -> pyo.ConcreteModel:
    """The MILP (module docstring); ``constraints=False`` leaves out the instance's budget and GPU-mix constraints
    (the infeasibility diagnosis solves without them), ``load_rounding=False`` the load-rounding rows (valid rows:
    the optimum is the same, only the search differs).  A window of a longer horizon (rolling.py) starts from
    what came before it: ``reserved_before[g, t]`` GPUs still held from reservations made earlier (already paid),
    and ``instances_before[m, g]`` instances running in the period before the window (for the load charge)."""
    m = pyo.ConcreteModel(name=f"capacity_plan {problem.name}")
    m.problem_gpus = problem.table.gpus()
    shape = (len(problem.offers), problem.periods)
    m.reserved_before = np.zeros(shape, np.int64) if reserved_before is None else reserved_before
    m.instances_before = np.zeros(m.problem_gpus.shape[:2], np.int64) if instances_before is None else instances_before
    add_assignment(m, problem)
    add_load_charge(m, problem)
    add_reserved(m, problem)
    add_on_demand(m, problem)
    add_spot(m, problem)
    add_capacity(m, problem)
    add_residual_capacity(m, problem)
    if load_rounding:
        add_load_rounding(m, problem)
    add_cost(m, problem)
    if constraints:
        for i, constraint in enumerate(problem.spec.constraints):
            (add_budget if constraint.kind == "budget" else add_gpu_mix)(m, problem, i)
    m.objective = pyo.Objective(expr=m.cost, sense=pyo.minimize)
    return m


def add_assignment(m: pyo.ConcreteModel, problem: CapacityProblem) -> None:
    """``y[m, g, t]`` and ``sum_g y = 1`` where the model needs GPUs in the period."""
    a = m.problem_gpus
    required = [(i, t) for i in range(a.shape[0]) for t in range(a.shape[2]) if (a[i, a[i, :, t] >= 0, t] > 0).any()]
    m.Y = pyo.Set(initialize=[(i, g, t) for i, t in required for g in range(a.shape[1]) if a[i, g, t] >= 0], dimen=3)
    m.y = pyo.Var(m.Y, domain=pyo.Binary)
    m.assign = pyo.Constraint(required, rule=lambda _, i, t: sum(m.y[i, g, t] for g in range(a.shape[1]) if (i, g, t) in m.Y) == 1)
    n = problem.table.instances
    most = n.max(axis=2)
    warm = [key for key in m.Y if problem.load_fraction[key[0]] > 0]
    m.x = pyo.Var(warm, domain=pyo.NonNegativeIntegers, bounds=lambda _, i, g, t: (0, int(most[i, g])))
    m.x_floor = pyo.Constraint(warm, rule=lambda _, i, g, t: m.x[i, g, t] >= int(n[i, g, t]) * m.y[i, g, t])
    m.x_open = pyo.Constraint(warm, rule=lambda _, i, g, t: m.x[i, g, t] <= int(most[i, g]) * m.y[i, g, t])

    def instances(i: int, g: int, t: int):
        return m.x[i, g, t] if (i, g, t) in m.x else int(n[i, g, t]) * m.y[i, g, t]

    m.instances = instances


def add_load_charge(m: pyo.ConcreteModel, problem: CapacityProblem) -> None:
    """``l[m, g, t] >= tp (x[m, g, t] - x[m, g, t-1])`` for models with a load time."""
    tp, lam = problem.table.tp, problem.load_fraction
    m.L = pyo.Set(initialize=[key for key in m.Y if lam[key[0]] > 0], dimen=3)
    m.l = pyo.Var(m.L, domain=pyo.NonNegativeReals)

    def rule(_, i, g, t):
        previous = [(-float(tp[i, g]), m.x[i, g, t - 1])] if (i, g, t - 1) in m.Y else []
        before = float(tp[i, g] * m.instances_before[i, g]) if t == 0 else 0.0
        return m.l[i, g, t] >= scaled([(float(tp[i, g]), m.x[i, g, t]), *previous]) - before

    m.load_charge = pyo.Constraint(m.L, rule=rule)


def add_reserved(m: pyo.ConcreteModel, problem: CapacityProblem) -> None:
    """Starts ``r[g, t]`` and held ``R[g, t]``, capped together with those held from before a window."""
    types = [g for g, o in enumerate(problem.offers) if o.reserved_term_periods is not None]
    m.r = pyo.Var(types, range(problem.periods), domain=pyo.NonNegativeIntegers)

    def held(g: int, t: int):
        term = problem.offers[g].reserved_term_periods
        return 0 if term is None else sum(m.r[g, s] for s in range(max(0, t - term + 1), t + 1))

    m.reserved_held = held
    capped = [(g, t) for g in types if problem.offers[g].reserved_max_gpus is not None for t in range(problem.periods)]
    m.reserved_cap = pyo.Constraint(capped, rule=lambda _, g, t: held(g, t) <= problem.offers[g].reserved_max_gpus - int(m.reserved_before[g, t]))


def add_on_demand(m: pyo.ConcreteModel, problem: CapacityProblem) -> None:
    """``O[g, t]`` in ``[0, cap]``."""
    types = [g for g, o in enumerate(problem.offers) if o.on_demand_per_gpu_period is not None]
    m.o = pyo.Var(types, range(problem.periods), domain=pyo.NonNegativeIntegers,
                  bounds=lambda _, g, t: (0, problem.offers[g].on_demand_max_gpus))


def add_spot(m: pyo.ConcreteModel, problem: CapacityProblem) -> None:
    """The staircase ``z[g, t, j]`` of the survivor table (module docstring)."""
    steps = [(g, t, j) for g, o in enumerate(problem.offers) if o.spot_per_gpu_period is not None
             for t in range(problem.periods) for j in range(1, int(o.spot_cap[t]) + 1)]
    m.Z = pyo.Set(initialize=steps, dimen=3)
    m.z = pyo.Var(m.Z, domain=pyo.Binary)
    m.spot_order = pyo.Constraint([(g, t, j) for g, t, j in steps if j > 1], rule=lambda _, g, t, j: m.z[g, t, j] <= m.z[g, t, j - 1])


def spot_bought(m: pyo.ConcreteModel, problem: CapacityProblem, g: int, t: int):
    """``S[g, t] = sum_j z[g, t, j]``."""
    return sum(m.z[g, t, j] for j in range(1, int(problem.offers[g].spot_cap[t]) + 1) if (g, t, j) in m.Z)


def instance_gpus(m: pyo.ConcreteModel, problem: CapacityProblem, i: int, g: int, t: int) -> list[tuple[float, object]]:
    """The GPUs model ``i``'s instances hold on type ``g`` in period ``t``, ``tp x`` (``tp n y`` for a model without
    load time), as (coefficient, variable) terms."""
    tp, n = problem.table.tp, problem.table.instances
    if (i, g, t) not in m.Y:
        return []
    if (i, g, t) not in m.x:
        return [(float(tp[i, g]) * float(n[i, g, t]), m.y[i, g, t])]
    return [(float(tp[i, g]), m.x[i, g, t])]


def model_use(m: pyo.ConcreteModel, problem: CapacityProblem, i: int, g: int, t: int) -> list[tuple[float, object]]:
    """``u[i, g, t] = tp x + lambda_i l`` as (coefficient, variable) terms (``tp n y`` for a model without load time)."""
    load = [(float(problem.load_fraction[i]), m.l[i, g, t])] if (i, g, t) in m.L else []
    return instance_gpus(m, problem, i, g, t) + load


def add_capacity(m: pyo.ConcreteModel, problem: CapacityProblem) -> None:
    """GPUs in use (load charge included) within ``R + P + sum_m w + O + K`` per type and period, with ``w <=
    min(u, Q)`` the pinned held GPUs each model uses (module docstring)."""
    n_models = problem.table.tp.shape[0]
    pinned = problem.held.pinned
    m.W = pyo.Set(initialize=[key for key in m.Y if pinned[key] > 0], dimen=3)
    m.w = pyo.Var(m.W, domain=pyo.NonNegativeReals, bounds=lambda _, i, g, t: (0, int(pinned[i, g, t])))
    m.pinned_use = pyo.Constraint(m.W, rule=lambda _, i, g, t: m.w[i, g, t] <= scaled(model_use(m, problem, i, g, t)))

    def rule(_, g, t):
        use = [term for i in range(n_models) for term in model_use(m, problem, i, g, t)]
        held = [term for terms, _ in purchased(m, problem, g, t).values() for term in terms]
        held += [(1.0, m.w[i, g, t]) for i in range(n_models) if (i, g, t) in m.W]
        if not use:
            return pyo.Constraint.Skip
        return scaled(use) <= scaled(held) + int(m.reserved_before[g, t]) + int(problem.held.pool[g, t])

    m.capacity = pyo.Constraint(range(len(problem.offers)), range(problem.periods), rule=rule)


def purchased(m: pyo.ConcreteModel, problem: CapacityProblem, g: int, t: int) -> dict[str, tuple[list[tuple[float, object]], int | None]]:
    """The GPUs type ``g`` holds in period ``t`` by each purchase option it offers, as (terms, cap): ``reserved``
    ``R[g, t] = sum_{t - term < s <= t} r[g, s]`` (cap: ``reserved.max_gpus`` less those held from before a window),
    ``on_demand`` ``O[g, t]`` (cap ``on_demand.max_gpus``) and ``spot`` ``K[g, t] = sum_j (k(j) - k(j-1)) z[g, t, j]``
    (cap ``k(spot_cap[t])``); None: no cap.  An option without a variable in the period is left out."""
    offer = problem.offers[g]
    parts: dict[str, tuple[list[tuple[float, object]], int | None]] = {}
    term = offer.reserved_term_periods
    if term is not None:
        cap = None if offer.reserved_max_gpus is None else offer.reserved_max_gpus - int(m.reserved_before[g, t])
        parts["reserved"] = ([(1.0, m.r[g, s]) for s in range(max(0, t - term + 1), t + 1)], cap)
    if (g, t) in m.o:
        parts["on_demand"] = ([(1.0, m.o[g, t])], offer.on_demand_max_gpus)
    k, cap_t = offer.spot_counted, int(offer.spot_cap[t])
    steps = [(float(k[j] - k[j - 1]), m.z[g, t, j]) for j in range(1, cap_t + 1) if (g, t, j) in m.Z and k[j] > k[j - 1]]
    if steps:
        parts["spot"] = (steps, int(k[cap_t]))
    return parts


def add_residual_capacity(m: pyo.ConcreteModel, problem: CapacityProblem) -> None:
    """Residual-capacity rows: for a type ``g``, a period ``t`` and a set ``S`` of its purchase options whose
    complement is capped,

        sum_{X in S} X[g, t]  >=  sum_{m free} (a[m, g, t] + b - D)^+ y[m, g, t]     (only where D > b),

    with ``D = sum_{X not in S} cap_X + R_before + P + sum_m Q`` the most GPUs the other options and the GPUs
    already held can give, ``b`` the GPUs of the models that can run on ``g`` alone in ``t`` (their ``y = 1``),
    and "free" the other models that may run on ``g``.  E.g. ``O >= (a + b - cap_R - cap_K) y``: a model that
    does not fit in the reserved and spot caps beside the forced models needs that much on demand.

    Valid (a superadditive lifting of the capacity row; cf. the residual-capacity inequalities of network design,
    Magnanti, Mirchandani and Vachani, Math. Programming 60 (1993) 233-250): the capacity row
    (:func:`add_capacity`) with ``X <= cap_X`` and ``w <= Q`` gives ``sum_S X >= max(0, use - D)``, and ``use >= b
    + sum_free a y`` (``u >= tp x >= tp n y``).  ``h(v) = max(0, b + v - D)`` is convex with ``h(0) = 0`` when ``D > b``, hence superadditive, so
    for binary ``y`` ``h(sum_{y_m = 1} a_m) >= sum_{y_m = 1} h(a_m)``.  It cuts off the LP's split assignments:
    a fraction ``y`` of a model that fills the capped options exactly (the LP's ``sum_S X >= b + sum a y - D``
    is weaker by ``(D - b)(1 - y)``); where ``D <= b`` the row is that LP row, and is left out.  On week_three_models
    the LP relaxation rises from 18,863.8 to 19,487.5 (docs/guide/capacity-plan.md)."""
    a = m.problem_gpus
    n_models, n_types, periods = a.shape
    rows: dict[tuple[int, int, str], tuple[list[tuple[float, object]], list[tuple[float, object]]]] = {}
    for g in range(n_types):
        for t in range(periods):
            runs = [i for i in range(n_models) if (i, g, t) in m.Y]
            forced = [i for i in runs if not any((i, h, t) in m.Y for h in range(n_types) if h != g)]
            b = int(sum(a[i, g, t] for i in forced))
            always = int(m.reserved_before[g, t]) + int(problem.held.pool[g, t]) + int(problem.held.pinned[:, g, t].sum())
            parts = purchased(m, problem, g, t)
            for size in range(1, len(parts)):
                for kept in itertools.combinations(parts, size):
                    caps = [cap for name, (_, cap) in parts.items() if name not in kept]
                    if None in caps or always + sum(caps) <= b:
                        continue
                    d = always + sum(caps)
                    need = [(float(a[i, g, t] + b - d), m.y[i, g, t]) for i in runs if i not in forced and a[i, g, t] + b > d]
                    if need:
                        rows[(g, t, "+".join(kept))] = ([term for name in kept for term in parts[name][0]], need)
    m.residual_capacity = pyo.Constraint(list(rows), rule=lambda _, g, t, kept: scaled(rows[(g, t, kept)][0]) >= scaled(rows[(g, t, kept)][1]))


def add_load_rounding(m: pyo.ConcreteModel, problem: CapacityProblem) -> None:
    """Load-rounding rows: for a type ``g``, a period ``t`` and a model ``m`` with a load time that may run there,

        E[g, t] >= y[m, g, t] - y[m, g, t-1]                                                   (switch)
        E[g, t] >= y[m, g, t] - (x[m, g, t-1] - n[m, g, t-1] y[m, g, t-1]) / d,   d = n[m, g, t] - n[m, g, t-1] > 0   (ramp)

    with ``E[g, t] = R + P + R_before + O + K - sum_m tp x - sum_{m without load} tp n y``: the type's GPUs held
    less those its models' instances hold.  (Without ``x[m, g, t-1]``, i.e. in the first period of the horizon or
    where the model may not run on ``g`` in ``t-1``: ``E[g, t] >= y[m, g, t]`` when the instances running before
    are fewer than ``n[m, g, t]``.)  Left out where GPUs pinned to a model are held (their ``w`` is continuous).

    Valid: in an integer plan ``E`` is an integer (every term is), and ``E >= sum_m lambda_m l[m, g, t] >= 0`` by
    the capacity row (:func:`add_capacity`).  If model ``m`` runs on ``g`` in ``t`` (``y[m, g, t] = 1``, so
    ``x[m, g, t] >= n[m, g, t] >= 1``) and has fewer instances there in ``t-1``, its load charge ``l >= tp (x_t -
    x_{t-1}) > 0``, so ``E > 0`` and ``E >= 1``.  Switch: ``y[m, g, t-1] = 0`` means ``x[m, g, t-1] = 0`` (``x <=
    U y``): it starts instances.  Ramp: with ``y[m, g, t-1] = 1`` and ``x[m, g, t-1] < n[m, g, t]`` it starts
    instances and the right side is at most 1; with ``x[m, g, t-1] >= n[m, g, t]`` the right side is at most 0;
    with ``y[m, g, t-1] = 0`` the right side is ``y[m, g, t]`` (the switch).  Where ``y[m, g, t] = 0`` the right
    sides are at most 0 (``x >= n y``).

    They price what the LP leaves out: the capacity row lets a load of ``lambda tp`` GPUs (a twelfth of a GPU for
    a model loaded in 5 minutes of an hour) be covered by that fraction of a purchase, where any plan needs a
    whole GPU or an instance kept warm.  On week_three_models (1,738 rows) the LP rises from $19,487.5 to $19,683.5;
    with each model's type fixed to a plan's, from $19,935.1 to $20,211.0 against that assignment's MILP optimum of
    about $20,256 (one-off runs, docs/guide/capacity-plan.md)."""
    n, tp = problem.table.instances, problem.table.tp
    n_models, n_types = tp.shape
    rows = []
    for g in range(n_types):
        for t in range(problem.periods):
            loading = [i for i in range(n_models) if (i, g, t) in m.x and n[i, g, t] >= 1]
            if not loading or problem.held.pinned[:, g, t].sum() > 0:
                continue
            spare = [term for terms, _ in purchased(m, problem, g, t).values() for term in terms]
            spare += [(-coef, var) for i in range(n_models) for coef, var in instance_gpus(m, problem, i, g, t)]
            held = int(m.reserved_before[g, t]) + int(problem.held.pool[g, t])
            for i in loading:
                if (i, g, t - 1) in m.x:
                    rows.append((spare, held, [(1.0, m.y[i, g, t]), (-1.0, m.y[i, g, t - 1])]))
                    d = int(n[i, g, t] - n[i, g, t - 1])
                    if d > 0:
                        rows.append((spare, held, [(1.0, m.y[i, g, t]), (-1.0 / d, m.x[i, g, t - 1]), (float(n[i, g, t - 1]) / d, m.y[i, g, t - 1])]))
                elif (int(m.instances_before[i, g]) if t == 0 else 0) < n[i, g, t]:
                    rows.append((spare, held, [(1.0, m.y[i, g, t])]))
    m.load_rounding = pyo.Constraint(range(len(rows)), rule=lambda _, k: scaled(rows[k][0]) + rows[k][1] >= scaled(rows[k][2]))


def relax_counts(m: pyo.ConcreteModel) -> None:
    """The assignment relaxation: every variable but the assignments ``y`` made continuous (instances, reservation
    starts, on-demand GPUs, spot steps).  Its optimum, and any lower bound HiGHS proves for it, bounds the MILP's
    optimum from below."""
    for component in (m.x, m.r, m.o):
        for var in component.values():
            var.domain = pyo.NonNegativeReals
    for var in m.z.values():
        var.domain = pyo.UnitInterval


def fix_integral_assignments(m: pyo.ConcreteModel, relaxed: pyo.ConcreteModel, tolerance: float = 1e-6) -> None:
    """Fix every assignment ``y`` that is integral (within ``tolerance``) in ``relaxed`` (the same problem's solved LP
    relaxation) to that value: a model-period's other types to 0 where one type is 1 (the RENS neighbourhood of
    the LP solution; Berthold, Math. Programming Computation 6 (2014) 33-54)."""
    for key in m.Y:
        share = float(pyo.value(relaxed.y[key]))
        if share >= 1 - tolerance:
            m.y[key].fix(1)
            for g in range(m.problem_gpus.shape[1]):
                if g != key[1] and (key[0], g, key[2]) in m.Y:
                    m.y[key[0], g, key[2]].fix(0)
        elif share <= tolerance:
            m.y[key].fix(0)


def held_gpus(m: pyo.ConcreteModel, problem: CapacityProblem, g: int, t: int):
    """``H[g, t] = R + P + sum_m Q + O + S`` (with the reservations held from before a window, and those already
    held before the plan)."""
    return (int(m.reserved_before[g, t]) + int(problem.held.total()[g, t]) + m.reserved_held(g, t) + (m.o[g, t] if (g, t) in m.o else 0)
            + spot_bought(m, problem, g, t))


def add_cost(m: pyo.ConcreteModel, problem: CapacityProblem) -> None:
    """``cost = sum c^R r + c^O O + c^S S``, $ over the horizon (reservations at their full term)."""
    terms = [(problem.offers[g].reserved_cost_per_gpu, m.r[g, t]) for g, t in m.r]
    terms += [(problem.offers[g].on_demand_per_gpu_period, m.o[g, t]) for g, t in m.o]
    terms += [(problem.offers[g].spot_per_gpu_period, m.z[g, t, j]) for g, t, j in m.Z]
    m.cost = pyo.Expression(expr=scaled([(float(c), v) for c, v in terms if c]))


def add_budget(m: pyo.ConcreteModel, problem: CapacityProblem, i: int) -> None:
    """``cost <= max_cost`` (``constraints[i]``)."""
    m.add_component(f"budget_{i}", pyo.Constraint(expr=m.cost <= problem.spec.constraints[i].max_cost))


def add_gpu_mix(m: pyo.ConcreteModel, problem: CapacityProblem, i: int) -> None:
    """``min_share sum_g H <= H_g <= max_share sum_g H`` in every period (``constraints[i]``)."""
    c = problem.spec.constraints[i]
    g = problem.type_names.index(c.gpu)

    def rule(_, t, side):
        everything = sum(held_gpus(m, problem, h, t) for h in range(len(problem.offers)))
        own = held_gpus(m, problem, g, t)
        return own >= c.min_share * everything if side == "min" else own <= c.max_share * everything

    m.add_component(f"gpu_mix_{i}", pyo.Constraint(range(problem.periods), ["min", "max"], rule=rule))


def extract(m: pyo.ConcreteModel, problem: CapacityProblem) -> dict[str, np.ndarray]:
    """The solved model's incumbent as the fields of a schedule (plan.Schedule): ``gpu_type`` and ``instances``
    ``[M, T]``, ``reserved_starts``, ``on_demand_gpus`` and ``spot_gpus`` ``[G, T]``."""
    a = m.problem_gpus
    n_models, n_types, periods = a.shape
    gpu_type = np.full((n_models, periods), NOT_RUNNING, dtype=np.int64)
    instances = np.zeros((n_models, periods), dtype=np.int64)
    for i, g, t in m.Y:
        if pyo.value(m.y[i, g, t]) > 0.5:
            gpu_type[i, t], instances[i, t] = g, round(pyo.value(m.instances(i, g, t)))
    shape = (n_types, periods)
    starts, on_demand, spot = np.zeros(shape, np.int64), np.zeros(shape, np.int64), np.zeros(shape, np.int64)
    for g, t in m.r:
        starts[g, t] = round(pyo.value(m.r[g, t]))
    for g, t in m.o:
        on_demand[g, t] = round(pyo.value(m.o[g, t]))
    for g, t, j in m.Z:
        spot[g, t] += round(pyo.value(m.z[g, t, j]))
    return {"gpu_type": gpu_type, "instances": instances, "reserved_starts": starts, "on_demand_gpus": on_demand, "spot_gpus": spot}


def largest_shares(m: pyo.ConcreteModel) -> dict[tuple[int, int], int]:
    """The type of each (model, period) with the largest ``y[m, g, t]`` in a solved model (its LP relaxation)."""
    best: dict[tuple[int, int], tuple[int, float]] = {}
    for i, g, t in m.Y:
        share = float(pyo.value(m.y[i, g, t]))
        if (i, t) not in best or share > best[(i, t)][1]:
            best[(i, t)] = (g, share)
    return {key: g for key, (g, _) in best.items()}


def fix_types(m: pyo.ConcreteModel, types: dict[tuple[int, int], int]) -> None:
    """Fix every assignment: model ``i`` runs on ``types[(i, t)]`` in period ``t`` (``y = 1`` there, 0 elsewhere)."""
    for i, g, t in m.Y:
        m.y[i, g, t].fix(1 if types[(i, t)] == g else 0)


def warm_start(m: pyo.ConcreteModel, problem: CapacityProblem, schedule: Schedule) -> None:
    """Load ``schedule`` (a plan the evaluator finds feasible) as the MIP start.  A model without load time runs
    exactly its need (``x = n y``: fewer GPUs than the schedule's, so the start stays feasible); one with load time
    keeps the schedule's instances up to ``U`` (clipping never adds load), its load charge ``l`` the increase; the
    pinned held GPUs a model uses ``w = min(u, Q)``."""
    for i, g, t in m.Y:
        m.y[i, g, t].value = 1 if schedule.gpu_type[i, t] == g else 0
    most = problem.table.instances.max(axis=2)
    for i, g, t in m.x:
        m.x[i, g, t].value = min(int(schedule.instances[i, t]), int(most[i, g])) if schedule.gpu_type[i, t] == g else 0
    tp = problem.table.tp
    for i, g, t in m.L:
        previous = m.x[i, g, t - 1].value if (i, g, t - 1) in m.x else (m.instances_before[i, g] if t == 0 else 0)
        m.l[i, g, t].value = max(0, int(tp[i, g]) * (m.x[i, g, t].value - previous))
    for i, g, t in m.W:
        m.w[i, g, t].value = min(int(problem.held.pinned[i, g, t]), sum(c * v.value for c, v in model_use(m, problem, i, g, t)))
    for g, t in m.r:
        m.r[g, t].value = int(schedule.reserved_starts[g, t])
    for g, t in m.o:
        m.o[g, t].value = int(schedule.on_demand_gpus[g, t])
    for g, t, j in m.Z:
        m.z[g, t, j].value = 1 if j <= schedule.spot_gpus[g, t] else 0
