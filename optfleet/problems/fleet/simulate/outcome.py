"""``optfleet simulate`` for fleet instances: pick the plan (a file, or a method's), simulate it, compare with the evaluator."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from optfleet import numbers, tables
from optfleet.errors import InfeasibleError, InputError
from optfleet.instance.loader import read_document
from optfleet.problems.fleet.evaluator import FleetEvaluation, evaluate
from optfleet.problems.fleet.plan import Plan, check_plan
from optfleet.problems.fleet.simulate.compare import comparison_table
from optfleet.problems.fleet.simulate.run import SimulationResult, check_run_size, simulate_plan
from optfleet.progress import Progress
from optfleet.results import json_safe
from optfleet.tables import HIGH, KEY, LOW, MEDIUM, Column, Table


NO_TPOT_IN_SLOTS = ("no TPOT in slots mode: a slot holds a request for its whole service time, with no per-token timing "
                    "(--mode batching measures it)")


@dataclass(frozen=True)
class SimulationOutcome:
    """A simulated plan, the evaluator's verdict on it and the analytic-vs-simulated table."""

    instance: str
    plan: Plan
    evaluation: FleetEvaluation
    result: SimulationResult
    comparison: pd.DataFrame

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        return json_safe({
            "instance": self.instance, "kind": "fleet", "plan": self.plan.to_dict(), "mode": r.mode, "requests": r.requests,
            "reps": r.reps, "seed": r.seed, "warmup_share": r.warmup_share,
            "metrics": {scope: {m: {"mean": v[0], "ci95": v[1]} for m, v in values.items()} for scope, values in r.metrics.items()},
            "comparison": self.comparison.to_dict(orient="records"), "comparison_note": self.unlike_models or None,
        })

    def text(self) -> str:
        """The report for people, at the output width (optfleet.tables): the plan, the run, the simulated metrics per
        pool and the analytic-vs-simulated table."""
        from optfleet.problems.fleet.report import render_simulation
        from optfleet.problems.fleet.routing_text import routing_blocks

        r = self.result
        pools = ", ".join(f"{p.name} {p.window_tokens}:{p.instances}" + (f" ({p.gpu})" if p.gpu else "") for p in self.plan.pools)
        spread = "mean +- 95 % half-width over replications" if r.reps > 1 else "one replication: no confidence interval"
        routing = f"gamma {self.plan.gamma:g}" if self.plan.rules is None else f"{len(self.plan.rules)} routing rules"
        return tables.page([
            f"instance {self.instance}: plan {self.plan.method}: {pools}, {routing}"
            + (f", serves {100 * self.plan.served_share:.2f} %" if self.plan.served_share < 1 else ""),
            *(routing_blocks(self.plan) if self.plan.rules is not None else []),
            f"{r.mode} mode, {r.requests:,} requests x {r.reps} replication{'s' if r.reps != 1 else ''} (seed {r.seed}); warm-up discarded: "
            + (f"the first floor({r.warmup_share:g} (N - 1)) = {int(r.warmup_share * (r.requests - 1)):,} arrivals of each run "
               f"(about {100 * r.warmup_share:.0f} %)" if r.mode == "slots"
               else f"at least the first {100 * r.warmup_share:.0f} % of the run's time (longer when a pool needs it to fill)")
            + f"; {spread}",
            "",
            render_simulation(r),
            *([NO_TPOT_IN_SLOTS] if r.mode == "slots" else []),
            "",
            "analytic (evaluator) vs simulated, in the metric's unit (rel. error: (simulated - analytic) / analytic, "
            "- where the analytic value is 0):",
            comparison_view(self.comparison),
            *([self.unlike_models] if self.unlike_models else []),
            *self.thin_pools,
        ])

    @property
    def thin_pools(self) -> list[str]:
        """A line per pool whose replications measured fewer than :data:`FEW_REQUESTS` requests on average."""
        lines = []
        for pool in self.plan.pools:
            requests = self.result.metrics.get(pool.name, {}).get("requests", (float("nan"), 0.0))[0]
            if requests == requests and requests < FEW_REQUESTS:
                lines.append(f"note: pool {pool.name} measured {requests:,.0f} requests per replication, too few to pin its P99 or "
                             "utilisation down (raise --requests)")
        return lines

    @property
    def unlike_models(self) -> str:
        """A warning when the simulator's mode is not the evaluator's service model ('' when they match)."""
        model = self.evaluation.service_model
        if (self.result.mode == "batching") == (model == "batching"):
            return ""
        return (f"note: the evaluator scores the {model} service model and the simulation ran in {self.result.mode} mode, so the "
                f"rel_error column compares two different models (--mode {'batching' if model == 'batching' else 'slots'} matches them)")


METRIC_NAMES = {"utilisation": "utilisation", "wait_p99_ms": "P99 wait ms", "ttft_p99_ms": "P99 TTFT ms",
                "tpot_mean_ms": "mean TPOT ms", "tpot_p99_ms": "P99 TPOT ms"}
COMPARISON_COLUMNS = [
    Column("pool", "pool", tables.text, KEY), Column("metric", "metric", tables.text, KEY),
    Column("analytic", "analytic", tables.number(4), KEY), Column("simulated", "simulated", tables.number(4), KEY),
    Column("ci95", "95 % half-width", tables.number(2), MEDIUM),
    Column("rel_error", "rel. error %", lambda v: numbers.fixed(None if v is None else 100 * v, 1), HIGH),
    Column("requests", "requests", tables.count, LOW),
]


def comparison_view(comparison: pd.DataFrame) -> Table:
    """The analytic-vs-simulated rows as a table, each metric named with its unit."""
    rows = [{**row, "metric": METRIC_NAMES.get(row["metric"], row["metric"])} for row in comparison.to_dict(orient="records")]
    return Table(COMPARISON_COLUMNS, rows)


FEW_REQUESTS = 1000
"""A pool measured on fewer requests than this per replication gets a note: its 99th percentile rests on ten or fewer."""


def simulate_instance(loaded: Any, *, method: str | None = None, plan: Plan | Mapping[str, Any] | str | Path | None = None,
                      progress: Progress, requests: int = 200_000, reps: int = 3, seed: int = 0, mode: str | None = None) -> SimulationOutcome:
    """Simulate ``plan`` (a Plan, its mapping, or a JSON file written by ``solve --out``/``--json``), else the plan of
    ``method`` (default ``sweep``), on the loaded fleet instance.  The options are checked (named as the command
    line's ``--requests``, ``--reps``, ``--seed``) before any work.  ``mode`` defaults to the instance's service
    model: continuous batching under ``slo.service_model: batching``, else slot servers."""
    problem = loaded.problem
    mode = mode or ("batching" if problem.service_model == "batching" else "slots")
    check_run_size(requests, reps, requests_field="--requests", reps_field="--reps")
    if seed < 0:
        raise InputError("--seed", seed, "must be >= 0")
    if problem.ttft_quantile != 0.99:
        raise InputError("ttft_quantile", problem.ttft_quantile, "the simulator measures and compares P99 figures; simulate at 0.99")
    if plan is None:
        results = loaded.kind.run(problem, method or "sweep", progress)
        chosen = results[0]
        if chosen.plan is None:
            raise InfeasibleError(f"{chosen.method}: {chosen.note}")
        plan = chosen.plan
    elif not isinstance(plan, Plan):
        plan = _read_plan(problem, plan)
    evaluation = evaluate(problem, plan)
    result = simulate_plan(problem, plan, requests=requests, reps=reps, seed=seed, mode=mode,
                           progress=lambda done, total: progress("simulate: replication", done, total))
    return SimulationOutcome(problem.name, plan, evaluation, result, comparison_table(evaluation, result))


def _read_plan(problem: Any, source: Mapping[str, Any] | str | Path) -> Plan:
    """The plan of ``source`` checked against the instance; a plan file's errors also name the file (``--plan``)."""
    try:
        plan = Plan.from_dict(plan_document(source, "fleet"))
        check_plan(problem, plan)
    except InputError as exc:
        if isinstance(source, Mapping) or exc.field == "--plan":
            raise
        raise InputError(exc.field, exc.value, f"{exc.problem} (--plan {source})") from None
    return plan


def plan_document(source: Mapping[str, Any] | str | Path, kind: str) -> Mapping[str, Any]:
    """A plan mapping of a ``kind`` instance: given, or read from plan.json (``solve --out``) or the JSON of ``optfleet
    solve`` (its chosen method's plan, ``results[0].plan``); anything else, another kind's included, is refused naming
    ``--plan``."""
    data = source if isinstance(source, Mapping) else read_document(Path(source), field="--plan")
    if "results" in data and data.get("kind") not in (None, kind):
        raise InputError("--plan", str(source), f"is the output of a {data['kind']} instance, not of this {kind} instance")
    if "pools" in data and "kind" not in data:
        return data
    results = data.get("results")
    if isinstance(results, list) and results and isinstance(results[0], Mapping) and "plan" in results[0]:
        return results[0]["plan"]
    if isinstance(results, list) and results and isinstance(results[0], Mapping):
        raise InputError("--plan", str(source), f"holds no plan: its first result ({results[0].get('method')}) has none")
    if "kind" in data and "results" not in data:
        raise InputError("--plan", str(source), f"holds no plan: it is an instance (kind {data['kind']}), not plan.json of solve --out "
                         "or the JSON of optfleet solve")
    raise InputError("--plan", str(source), "holds no plan (expected plan.json of solve --out, or the JSON of optfleet solve)")
