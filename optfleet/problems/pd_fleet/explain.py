"""Sensitivity of the pd_fleet MILP's plan (models/pd_fleet.py) for ``optfleet explain``.

The plan is :func:`optfleet.problems.pd_fleet.exact.solve_pd`'s (method ``milp``).  What it gives:

* **binding**, per pool, every limit of the pool's choice with its value, its limit and the slack, and which role's
  count binds it: ``binds`` names the role (``prefill``, ``decode`` or ``instances`` for an aggregated pool) whose
  count less one breaks that limit.  A disaggregated pool's limits are the analytic model's (analytic.py): P99 TTFT,
  P99 TPOT, prefill and KV-link utilisation and decode batch occupancy against ``rho_max``, and the share of requests
  that wait for a decode batch slot (at most ``ADMISSION_WAIT_SHARE``); an aggregated pool's are the fleet batching
  model's P99 TTFT, P99 TPOT and slot occupancy.  The SLOs live in each pool's sizing (the frontier points and least
  counts), not in the MILP's rows, so this is where they show.  Then the declared ``constraints:`` rows, with slack;
* **shadow prices** of the LP left when the choice binaries (which option, which frontier point) are fixed at the
  plan and the instance counts are continuous: the least-count rows (2) and (3) carry each instance's price while
  nothing else binds, and a declared constraint that binds (a power cap, a GPU-mix share, a fixed count) carries what
  it costs per unit.  They hold for the chosen integer plan: they price a small move of a limit with every pool's
  option and frontier point kept;
* **price ranges**: HiGHS's cost ranging of each chosen count in that LP ($/h per instance);
* **parameters**: ``rate_growth``, ``ttft_ms`` and ``tpot_ms`` (the P99 targets), ``rho_max``, ``link_gb_per_s`` (the
  default KV link; pair overrides stay) and ``price:<GPU>`` ($/GPU-hour); each value re-sizes the pools (prices
  excepted, which reuse the sizing) and re-solves the MILP.  The break-even of the second-cheapest GPU type's price by
  re-solving; alternatives: ``no <type>`` per type used (two or more), ``no disaggregation`` when a pool is
  disaggregated and ``no aggregation`` when a pool is aggregated and pairs are offered.  The default curve is
  ``rate_growth=1,1.3``: what 30 % more traffic costs.

The analytic pool model is an approximation (every evaluation carries analytic.APPROXIMATIONS); these numbers are the
model's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pandas as pd
import pyomo.environ as pyo

from optfleet.errors import InfeasibleError
from optfleet.problems.pd_fleet.analytic import ADMISSION_WAIT_SHARE
from optfleet.problems.pd_fleet.plan import AggregatedPoolPlan, DisaggregatedPoolPlan
from optfleet.problems.pd_fleet.problem import DecodeOption, PdProblem, PoolTraffic, PrefillOption
from optfleet.problems.pd_fleet.schema import MAX_LINK_GB_PER_S, MAX_PRICE_PER_GPU_HOUR, MIN_LINK_GB_PER_S
from optfleet.problems.pd_fleet.sizing import aggregated_states, disaggregated_pool
from optfleet.sensitivity.explainer import MAX_RATE_GROWTH, Analysis, Explainer, Parameter, Solved
from optfleet.solvers.sensitivity import fixed_lp_sensitivity, row_binds, row_slack

DUAL_ZERO = 1e-9
LEAST_ROWS = {"agg_least": "least aggregated instances", "prefill_least": "least prefill instances",
              "decode_least": "least decode instances"}

Limits = dict[str, tuple[float, float, str]]  # limit name -> (value, limit, unit)


def explainer(problem: PdProblem) -> Explainer:
    """The pd_fleet kind's sensitivity hooks (optfleet/sensitivity/explainer.py)."""
    prices = sorted(problem.gpus.values(), key=lambda g: g.cost_per_gpu_hour)
    return Explainer("$/h", solve, analyse, parameters(problem), alternatives,
                     break_even=(f"price:{prices[1].name}",) if len(prices) > 1 else (), default_curves=("rate_growth=1,1.3",))


def solve(problem: PdProblem) -> Solved:
    from optfleet.problems.pd_fleet.exact import solve_pd

    try:
        result = solve_pd(problem)
    except InfeasibleError as exc:
        return Solved(None, "infeasible", str(exc), None)
    return Solved(result.evaluation.cost_per_hour, result.report.status, result.evaluation.describe(), result)


def parameters(problem: PdProblem) -> dict[str, Parameter]:
    found = {
        "rate_growth": Parameter("rate_growth", "x", f"request rate as a multiple of {problem.rate_rps:g} req/s", 1.0, _grown,
                                 0.0, MAX_RATE_GROWTH, open_interval=False),
        "ttft_ms": Parameter("ttft_ms", "ms", "P99 TTFT target", problem.ttft_p99_ms, lambda p, v: replace(p, ttft_p99_ms=v)),
        "tpot_ms": Parameter("tpot_ms", "ms", "P99 TPOT target", problem.tpot_p99_ms, lambda p, v: replace(p, tpot_p99_ms=v)),
        "rho_max": Parameter("rho_max", "", "utilisation cap of every server, link and decode batch", problem.rho_max,
                             lambda p, v: replace(p, rho_max=v), 0.0, 1.0),  # (0, 1) as in the instance file
        "link_gb_per_s": Parameter("link_gb_per_s", "GB/s", "KV link bandwidth of every GPU pair without its own",
                                   problem.link_default_gb_per_s, lambda p, v: replace(p, link_default_gb_per_s=v),
                                   MIN_LINK_GB_PER_S, MAX_LINK_GB_PER_S, open_interval=False, low_included=True),
    }
    for gpu in problem.gpus.values():
        found[f"price:{gpu.name}"] = Parameter(f"price:{gpu.name}", "$/GPU-h", f"price of a {gpu.name} GPU-hour", gpu.cost_per_gpu_hour,
                                               lambda p, v, name=gpu.name: _priced(p, name, v), 0.0, MAX_PRICE_PER_GPU_HOUR,
                                               open_interval=False)
    return found


def _grown(problem: PdProblem, factor: float) -> PdProblem:
    """``problem`` with every pool's rate (and the instance's) times ``factor``."""
    return replace(problem, rate_rps=problem.rate_rps * factor, pools=tuple(replace(p, rate_rps=p.rate_rps * factor) for p in problem.pools))


def _priced(problem: PdProblem, gpu: str, price_per_gpu_hour: float) -> PdProblem:
    """``problem`` with ``gpu`` at ``price_per_gpu_hour``: its type's price and every option's instance price on it."""
    def repriced(options: tuple) -> tuple:
        return tuple(replace(o, cost_per_instance_hour=o.tp * price_per_gpu_hour) if o.gpu == gpu else o for o in options)

    gpus = {name: replace(g, cost_per_gpu_hour=price_per_gpu_hour) if name == gpu else g for name, g in problem.gpus.items()}
    return replace(problem, gpus=gpus, aggregated=repriced(problem.aggregated), prefill=repriced(problem.prefill),
                   decode=repriced(problem.decode))


def alternatives(problem: PdProblem, solved: Solved) -> list[tuple[str, PdProblem]]:
    """``no <type>`` for each GPU type the plan uses (two or more), ``no disaggregation`` and ``no aggregation``."""
    evaluation = solved.detail.evaluation
    found = []
    if len(evaluation.gpus) > 1:
        for gpu in evaluation.gpus:
            def without(options: tuple, gpu: str = gpu) -> tuple:
                return tuple(o for o in options if o.gpu != gpu)

            found.append((f"no {gpu}", replace(problem, aggregated=without(problem.aggregated), prefill=without(problem.prefill),
                                               decode=without(problem.decode))))
    modes = {p.mode for p in evaluation.pools}
    if "disaggregated" in modes and problem.aggregated:
        found.append(("no disaggregation", replace(problem, prefill=(), decode=())))
    if "aggregated" in modes and problem.prefill and problem.decode:
        found.append(("no aggregation", replace(problem, aggregated=())))
    return found


def analyse(problem: PdProblem, solved: Solved) -> Analysis:
    from optfleet.problems.pd_fleet.exact import solved_model

    result = solved.detail
    records = [record for pool, choice in zip(problem.pools, result.plan.pools, strict=True) if choice is not None
               for record in _pool_limits(problem, pool, choice)]
    model = solved_model(problem, result)
    for declared in model.user_constraints:
        for row in declared.block.component_data_objects(pyo.Constraint, active=True):
            records.append({"pool": "fleet", "limit": f"{declared.block.local_name} ({declared.kind.name}: {row.local_name})", "value": pyo.value(row.body),
                            "bound": pyo.value(row.upper if row.upper is not None else row.lower), "slack": row_slack(row),
                            "binds": "yes" if row_binds(row) else "", "slack_unit": ""})
    lp = fixed_lp_sensitivity(model, continuous=[model.n_agg, model.x, model.y])
    duals = []
    for row in lp.rows:
        family = row.name.split("[", 1)[0]
        if abs(row.dual) <= DUAL_ZERO or family not in LEAST_ROWS and not row.name.startswith("user_"):
            continue
        if family in LEAST_ROWS:
            if row.bound == 0.0:  # a candidate the plan does not take: it requires nothing
                continue
            # the row is ``count >= r`` or ``-count <= -r``: stated per instance of the requirement r either way
            flip = -1.0 if row.bound < 0 else 1.0
            low, high = sorted((flip * row.bound_low, flip * row.bound_high))
            duals.append({"where": _candidate_pool(problem, model, family, row.name), "constraint": LEAST_ROWS[family],
                          "shadow_price": flip * row.dual, "unit": "$/h per instance", "bound": flip * row.bound, "bound_low": low,
                          "bound_high": high, "row": row.name})
        else:
            duals.append({"where": "fleet", "constraint": row.name, "shadow_price": row.dual, "unit": "$/h per unit of the row",
                          "bound": row.bound, "bound_low": row.bound_low, "bound_high": row.bound_high, "row": row.name})
    ranges = []
    for var, role in ((model.n_agg, "aggregated"), (model.x, "prefill"), (model.y, "decode")):
        for index in var:
            column = lp.column(var[index].name)
            if column.value > 0.5:
                ranges.append({"pool": _candidate_pool(problem, model, var.local_name, var[index].name), "role": role,
                               "instances": column.value, "price_per_instance_hour": column.cost, "price_low": column.cost_low,
                               "price_high": column.cost_high})
    note = ("shadow prices and price ranges hold for the chosen integer plan: the LP with every pool's option and frontier point "
            f"fixed and the instance counts continuous (LP cost ${lp.report.objective:,.2f}/h against the plan's ${solved.objective:,.2f}/h); "
            "the latency limits are the analytic pool model's and the fleet batching model's, approximations (see the report)")
    return Analysis({"binding": pd.DataFrame(records),
                     "shadow_prices": pd.DataFrame(duals, columns=["where", "constraint", "shadow_price", "unit", "bound", "bound_low",
                                                                   "bound_high", "row"]),
                     "price_ranges": pd.DataFrame(ranges)}, (note,))


def _candidate_pool(problem: PdProblem, model: pyo.ConcreteModel, family: str, name: str) -> str:
    """The pool of the candidate a row or count of ``family`` belongs to, from its index in ``name`` (the plan names
    the pool's option)."""
    index = int(name[name.index("[") + 1:-1])
    candidates = model.candidates.aggregated if family in ("agg_least", "n_agg") else model.candidates.pairs
    return problem.pools[candidates[index].pool].label


def _pool_limits(problem: PdProblem, pool: PoolTraffic, choice) -> list[dict]:
    """The binding rows of one pool (module docstring): each limit at the plan, and which role's count less one breaks it."""
    if isinstance(choice, AggregatedPoolPlan):
        option = problem.option(choice.option)
        at = _aggregated_limits(problem, pool, option)
        n = choice.instances
        limits, broken = at(n), {"instances": at(n - 1) if n > 1 else None}
    else:
        assert isinstance(choice, DisaggregatedPoolPlan)
        prefill, decode = problem.option(choice.prefill), problem.option(choice.decode)
        assert isinstance(prefill, PrefillOption) and isinstance(decode, DecodeOption)
        at2 = _disaggregated_limits(problem, pool, prefill, decode)
        x, y = choice.prefill_instances, choice.decode_instances
        limits = at2(x, y)
        broken = {"prefill": at2(x - 1, y) if x > 1 else None, "decode": at2(x, y - 1) if y > 1 else None}
    rows = []
    for name, (value, limit, unit) in limits.items():
        binds = [role for role, fewer_limits in broken.items() if fewer_limits is not None and not _holds(*fewer_limits[name][:2])]
        rows.append({"pool": pool.label, "limit": name, "value": value, "bound": limit, "slack": max(limit - value, 0.0),
                     "binds": ", ".join(binds), "slack_unit": unit})
    return rows


def _holds(value: float, limit: float) -> bool:
    return value <= limit * (1 + 1e-9)


def _aggregated_limits(problem: PdProblem, pool: PoolTraffic, option) -> Callable[[int], Limits]:
    def at(n: int) -> Limits:
        (state,) = aggregated_states(problem, pool, option, [n])
        return {"P99 TTFT": (state.ttft_p99_ms, problem.ttft_p99_ms, "ms"), "P99 TPOT": (state.tpot_p99_ms, problem.tpot_p99_ms, "ms"),
                "slot occupancy": (state.utilisation, problem.rho_max, "")}

    return at


def _disaggregated_limits(problem: PdProblem, pool: PoolTraffic, prefill: PrefillOption, decode: DecodeOption) -> Callable[[int, int], Limits]:
    model = disaggregated_pool(problem, pool, prefill, decode)

    def at(x: int, y: int) -> Limits:
        m = model.metrics(x, y)
        return {"P99 TTFT": (m.ttft_p99_ms, problem.ttft_p99_ms, "ms"), "P99 TPOT": (m.tpot_p99_ms, problem.tpot_p99_ms, "ms"),
                "prefill utilisation": (m.prefill_utilisation, problem.rho_max, ""),
                "KV link utilisation": (m.link_utilisation, problem.rho_max, ""),
                "decode batch occupancy": (m.decode_utilisation, problem.rho_max, ""),
                "waiting for a decode slot": (model.decode_state(y).admission_probability, ADMISSION_WAIT_SHARE, "")}

    return at
