"""``optfleet simulate`` for pd_fleet instances: pick the plan (a file, or a method's), simulate every pool at its
counts, and compare each with the one evaluator (evaluator.py).

* A **disaggregated** pool ``(prefill, x, decode, y)`` runs through :func:`simulate_pool` with the pool's own request
  atoms and rate, ``x`` prefill instances of the prefill option (its engine and token budget), the link of the pair's
  GPU types, and ``y`` decode instances timed by the decode engine's affine step (analytic.DisaggregatedPool.decode,
  the step the analytic model uses).
* An **aggregated** pool ``(option, n)`` runs through the fleet kind's continuous-batching simulator
  (fleet/simulate/batching.py ``simulate_batching``) on the fleet pool config the evaluator scores (option.pool):
  Poisson arrivals at the pool's rate, each request's ``(L_in, L_out)`` drawn from the pool's atoms, the first
  ``floor(warmup_share (N - 1))`` arrivals left out as in metrics.py; its utilisation is the slot occupancy,
  ``sum over measured time of busy slots / (n x slots per instance x window)``.

Each figure is the mean over ``reps`` replications (seeds ``seed .. seed + reps - 1``) with its 95 % Student-t
half-width (fleet/simulate/run.py ``mean_ci95``).  Compared per pool: P99 TTFT, P99 TPOT, mean TPOT and each role's
utilisation (analytic vs simulated, relative error ``(simulated - analytic) / analytic``), and the attainment, the
share of measured requests meeting both targets (P99 TTFT and P99 TPOT of the instance's slo).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from optfleet import numbers, tables
from optfleet.errors import InfeasibleError, InputError
from optfleet.problems.fleet.simulate.batching import simulate_batching
from optfleet.problems.fleet.simulate.outcome import plan_document
from optfleet.problems.fleet.simulate.run import (MAX_SIMULATED_REQUESTS, PERCENTILES, check_run_size, mean_ci95, request_tpot_ms,
                                                   tpot_summary)
from optfleet.problems.pd_fleet.evaluator import PdEvaluation, PoolEvaluation, evaluate
from optfleet.problems.pd_fleet.plan import AggregatedPoolPlan, DisaggregatedPoolPlan, PdPlan, plan_from_dict
from optfleet.problems.pd_fleet.problem import AggregatedOption, DecodeOption, PdProblem, PoolTraffic, PrefillOption
from optfleet.problems.pd_fleet.roles import DecodeRole, PrefillRole
from optfleet.problems.pd_fleet.simulate.metrics import busy_seconds
from optfleet.problems.pd_fleet.simulate.pool import DEFAULT_WARMUP_SHARE, MAX_POOL_REQUESTS, simulate_pool
from optfleet.problems.pd_fleet.sizing import disaggregated_pool
from optfleet.progress import Progress
from optfleet.results import json_safe

DEFAULT_REQUESTS = 40_000
"""Arrivals per replication and pool by default: enough for a P99 on some 360 requests after the warm-up, and a few
seconds per pool (a disaggregated pool's prefill queue runs request by request in Python)."""

COMPARED = (("P99 TTFT ms", "ttft_p99_ms", "ttft_p99_ms"), ("P99 TPOT ms", "tpot_p99_ms", "tpot_p99_ms"),
            ("mean TPOT ms", "tpot_mean_ms", "tpot_mean_ms"))
"""``(metric, evaluator field, simulated figure)`` compared in every pool."""

UTILISATIONS = {"prefill": "prefill_busy_share", "link": "link_busy_share", "decode": "decode_occupancy_share",
                "slots": "slot_occupancy"}
"""The evaluator's utilisation of each role -> the simulated figure measuring it (decode: mean running sequences over
max_batch; slots: an aggregated pool's slot occupancy)."""


@dataclass(frozen=True)
class PoolSimulated:
    """One pool's simulated figures ``{name: (mean, 95 % half-width)}`` (empty for an idle pool)."""

    evaluation: PoolEvaluation
    metrics: dict[str, tuple[float, float]]


@dataclass(frozen=True)
class PdSimulationOutcome:
    """A simulated pd_fleet plan, the evaluator's verdict on it, and the analytic-vs-simulated rows."""

    instance: str
    plan: PdPlan
    evaluation: PdEvaluation
    pools: tuple[PoolSimulated, ...]
    requests: int
    reps: int
    seed: int
    ttft_target_ms: float
    tpot_target_ms: float

    @property
    def comparison(self) -> list[dict[str, Any]]:
        """Per pool and metric: analytic, simulated, its 95 % half-width, the relative error and the requests measured."""
        rows = []
        for p in self.pools:
            if not p.metrics:
                continue
            e = p.evaluation
            pairs = [(metric, getattr(e, ours), theirs) for metric, ours, theirs in COMPARED]
            pairs += [(f"{role} utilisation", value, UTILISATIONS[role]) for role, value in e.utilisation.items()]
            for metric, analytic, figure in pairs:
                simulated, half = p.metrics.get(figure, (float("nan"), float("nan")))
                error = None if not analytic or not math.isfinite(analytic) else (simulated - analytic) / analytic
                rows.append({"pool": e.index, "mode": e.mode, "metric": metric, "analytic": analytic, "simulated": simulated,
                             "ci95": half, "rel_error": error, "requests": p.metrics["requests"][0]})
        return rows

    @property
    def attainment(self) -> list[dict[str, Any]]:
        """Per simulated pool: the share of measured requests meeting both targets (mean, 95 % half-width)."""
        return [{"pool": p.evaluation.index, "mode": p.evaluation.mode, "choice": p.evaluation.choice,
                 "attainment": p.metrics["attainment"][0], "ci95": p.metrics["attainment"][1]} for p in self.pools if p.metrics]

    def to_dict(self) -> dict[str, Any]:
        return json_safe({
            "instance": self.instance, "kind": "pd_fleet", "plan": self.plan.to_dict(), "requests": self.requests,
            "reps": self.reps, "seed": self.seed, "warmup_share": DEFAULT_WARMUP_SHARE,
            "targets": {"ttft_p99_ms": self.ttft_target_ms, "tpot_p99_ms": self.tpot_target_ms},
            "evaluation": {"cost_per_hour": self.evaluation.cost_per_hour, "feasible": self.evaluation.feasible,
                           "violations": list(self.evaluation.violations)},
            "pools": [{"pool": p.evaluation.index, "mode": p.evaluation.mode, "choice": p.evaluation.choice,
                       "metrics": {name: {"mean": m, "ci95": h} for name, (m, h) in p.metrics.items()}} for p in self.pools],
            "comparison": self.comparison, "attainment": self.attainment,
        })

    def text(self) -> str:
        """The report for people (optfleet.tables): the plan, the run, analytic vs simulated per pool, attainment."""
        spread = "mean +- 95 % half-width over replications" if self.reps > 1 else "one replication: no confidence interval"
        verdict = "feasible" if self.evaluation.feasible else "infeasible: " + "; ".join(self.evaluation.violations)
        return tables.page([
            f"instance {self.instance}: plan {self.plan.method}: {self.evaluation.describe()} "
            f"(${self.evaluation.cost_per_hour:,.2f}/h; evaluator: {verdict})",
            f"{self.requests:,} requests per pool x {self.reps} replication{'s' if self.reps != 1 else ''} (seed {self.seed}); the first "
            f"{100 * DEFAULT_WARMUP_SHARE:g} % of each run's arrivals left out; {spread}",
            "",
            "analytic (evaluator) vs simulated (rel. error: (simulated - analytic) / analytic, - where the analytic value is 0):",
            tables.Table(COMPARISON_COLUMNS, self.comparison),
            *(["analytic -: unbounded (a queue without a steady state: the evaluator's verdict above says which)"]
              if any(r["analytic"] is not None and not math.isfinite(r["analytic"]) for r in self.comparison) else []),
            "",
            f"attainment: share of measured requests with TTFT <= {self.ttft_target_ms:g} ms and TPOT <= {self.tpot_target_ms:g} ms",
            tables.Table(ATTAINMENT_COLUMNS, self.attainment),
        ])


COMPARISON_COLUMNS = [
    tables.Column("pool", "pool", tables.text, tables.KEY), tables.Column("mode", "mode", tables.text, tables.MEDIUM),
    tables.Column("metric", "metric", tables.text, tables.KEY),
    tables.Column("analytic", "analytic", lambda v: numbers.significant(None if v is not None and not math.isfinite(v) else v, 4),
                  tables.KEY),
    tables.Column("simulated", "simulated", tables.number(4), tables.KEY),
    tables.Column("ci95", "95 % half-width", tables.number(2), tables.MEDIUM),
    tables.Column("rel_error", "rel. error %", lambda v: numbers.fixed(None if v is None else 100 * v, 1), tables.HIGH),
    tables.Column("requests", "requests", tables.count, tables.LOW),
]
ATTAINMENT_COLUMNS = [
    tables.Column("pool", "pool", tables.text, tables.KEY), tables.Column("choice", "plan", tables.text, tables.KEY),
    tables.Column("attainment", "attainment %", tables.percent(2), tables.KEY),
    tables.Column("ci95", "95 % half-width", lambda v: numbers.fixed(None if v is None else 100 * v, 2), tables.MEDIUM),
]


def simulate_instance(loaded: Any, *, method: str | None = None, plan: PdPlan | Mapping[str, Any] | str | Path | None = None,
                      progress: Progress, requests: int = DEFAULT_REQUESTS, reps: int = 3, seed: int = 0,
                      mode: str | None = None) -> PdSimulationOutcome:
    """Simulate ``plan`` (a PdPlan, its mapping, or a JSON file written by ``solve --out``/``--json``), else the plan
    of ``method`` (default: the instance's ``solve.method``), every busy pool at its counts (module docstring).  The
    options are checked (named as the command line's ``--requests``, ``--reps``, ``--seed``) before any work."""
    problem: PdProblem = loaded.problem
    if mode is not None:
        raise InputError("--mode", mode, "pd_fleet has one simulator (disaggregated pools by stage, aggregated ones by "
                         "continuous batching); leave --mode out")
    check_run_size(requests, reps, requests_field="--requests", reps_field="--reps")
    if requests > MAX_POOL_REQUESTS:
        raise InputError("--requests", requests, f"above the limit of {MAX_POOL_REQUESTS:,} requests per replication of a "
                         "pd_fleet pool (a disaggregated pool's run holds every request's stage times at once); use more "
                         "--reps instead")
    busy = sum(1 for pool in problem.pools if pool.busy)
    if requests * reps * busy > MAX_SIMULATED_REQUESTS:
        raise InputError("--requests", requests, f"{requests:,} requests x {reps:,} replications x {busy} pools with traffic "
                         f"= {requests * reps * busy:,} simulated requests, above the limit of {MAX_SIMULATED_REQUESTS:,} "
                         "(every pool is simulated at these sizes); use fewer requests or replications")
    if seed < 0:
        raise InputError("--seed", seed, "must be >= 0")
    if plan is None:
        chosen = loaded.kind.run(problem, method or problem.method, progress)[0]
        if chosen.plan is None:
            raise InfeasibleError(f"{chosen.method}: {chosen.note}")
        plan = chosen.plan
    elif not isinstance(plan, PdPlan):
        plan = read_plan(problem, plan)
    evaluation = evaluate(problem, plan)
    busy = [j for j, p in enumerate(problem.pools) if p.busy and plan.pools[j] is not None]
    pools = []
    for j, (pool, choice, scored) in enumerate(zip(problem.pools, plan.pools, evaluation.pools, strict=True)):
        metrics = {} if j not in busy else simulate_choice(problem, pool, choice, requests=requests, reps=reps, seed=seed)
        pools.append(PoolSimulated(scored, metrics))
        if j in busy:
            progress("simulate: pool", busy.index(j) + 1, len(busy))
    return PdSimulationOutcome(problem.name, plan, evaluation, tuple(pools), requests, reps, seed, problem.ttft_p99_ms,
                               problem.tpot_p99_ms)


def read_plan(problem: PdProblem, source: Mapping[str, Any] | str | Path) -> PdPlan:
    """The plan of ``source`` (a mapping, plan.json of ``solve --out`` or the JSON of ``optfleet solve``) checked
    against the instance; a plan file's errors also name the file (``--plan``)."""
    try:
        return plan_from_dict(problem, dict(plan_document(source, "pd_fleet")))
    except InputError as exc:
        if isinstance(source, Mapping) or exc.field == "--plan":
            raise
        raise InputError(exc.field, exc.value, f"{exc.problem} (--plan {source})") from None


def simulate_choice(problem: PdProblem, pool: PoolTraffic, choice: AggregatedPoolPlan | DisaggregatedPoolPlan, *,
                    requests: int, reps: int, seed: int) -> dict[str, tuple[float, float]]:
    """``{figure: (mean, 95 % half-width)}`` of ``pool`` served by ``choice`` (module docstring)."""
    if isinstance(choice, DisaggregatedPoolPlan):
        prefill, decode = problem.option(choice.prefill), problem.option(choice.decode)
        assert isinstance(prefill, PrefillOption) and isinstance(decode, DecodeOption)
        model = disaggregated_pool(problem, pool, prefill, decode)
        return simulate_pool(PrefillRole(choice.prefill_instances, prefill.engine, prefill.token_budget), model.link,
                             DecodeRole(choice.decode_instances, model.decode, decode.max_batch), rate_rps=pool.rate_rps,
                             l_in_tokens=pool.l_in, l_out_tokens=pool.l_out, weights=pool.weight, requests=requests, reps=reps,
                             seed=seed, ttft_target_ms=problem.ttft_p99_ms, tpot_target_ms=problem.tpot_p99_ms).metrics
    option = problem.option(choice.option)
    assert isinstance(option, AggregatedOption)
    samples: dict[str, list[float]] = {}
    for rep in range(reps):
        for name, value in _aggregated_replication(problem, pool, option, choice.instances, requests, seed + rep).items():
            samples.setdefault(name, []).append(value)
    return {name: mean_ci95(values) for name, values in samples.items()}


def _aggregated_replication(problem: PdProblem, pool: PoolTraffic, option: AggregatedOption, instances: int, requests: int,
                            seed: int) -> dict[str, float]:
    """One replication of an aggregated pool on the fleet's batching simulator (module docstring)."""
    config = option.pool(pool.window_tokens)
    if config is None:
        raise InfeasibleError(f"{pool.label}: {option.label} holds no sequence of the {pool.window_tokens:,}-token window")
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1.0 / pool.rate_rps, size=requests))
    pick = rng.choice(len(pool.l_in), size=requests, p=pool.weight / pool.weight.sum())
    l_in, l_out = pool.l_in[pick].astype(np.int64), pool.l_out[pick].astype(np.int64)
    times = simulate_batching(config, instances, arrival, l_in, l_out)
    t0, t1 = float(arrival[int(DEFAULT_WARMUP_SHARE * (requests - 1))]), float(arrival[-1])
    keep = arrival >= t0
    ttft = 1e3 * (times.first_token_s - arrival)[keep]
    tpot = np.full(int(keep.sum()), np.nan)
    many = l_out[keep] >= 2
    tpot[many] = request_tpot_ms(times.first_token_s[keep][many], times.finish_s[keep][many], l_out[keep][many])
    out = {"requests": float(keep.sum()), "ttft_mean_ms": float(ttft.mean())}
    out.update({f"ttft_p{p}_ms": float(np.percentile(ttft, p)) for p in PERCENTILES})
    out.update(tpot_summary(tpot[many], problem.tpot_p99_ms))
    met = (ttft <= problem.ttft_p99_ms) & ~(tpot > problem.tpot_p99_ms)  # NaN (L_out = 1) meets the TPOT target
    out["ttft_attainment"], out["attainment"] = float(np.mean(ttft <= problem.ttft_p99_ms)), float(met.mean())
    slots = instances * config.slots_per_instance
    out["slot_occupancy"] = busy_seconds(times.start_s, times.finish_s, (t0, t1)) / (slots * (t1 - t0))
    return out
