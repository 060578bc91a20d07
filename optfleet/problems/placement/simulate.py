"""``optfleet simulate`` on a placement instance: a method's placement on fresh draws of the instance's workload.

Replication ``i`` regenerates the workload with seed ``seed + i`` (a trace is replayed once: it has no draws), runs
the method on it and scores the placement with the simulator (evaluate.py); the report gives each replication's
metrics and their means with 95 % confidence half-widths (Student t over the replications).  With ``--plan`` (a
JSON list of server indices, or ``{"placement": [...]}``), that placement is scored on the instance's own
workload.  ``--requests`` and ``--mode`` are the fleet simulator's options and do not apply: the request count is
the instance's and the simulator is always the continuous-batching one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from optfleet import numbers
from optfleet.errors import InfeasibleError, InputError
from optfleet.instance.documents import read_text
from optfleet.problems.fleet.simulate.run import MAX_REPS
from optfleet.progress import Progress
from optfleet.results import json_safe

METRICS = ("objective_ms", "p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p50_ntpot_ms", "p90_ntpot_ms",
           "throughput_tokens_per_s", "prefix_hit_rate", "slo_attainment")


@dataclass(frozen=True)
class PlacementSimulation:
    name: str
    method: str
    replications: tuple[dict[str, Any], ...]
    notes: tuple[str, ...]

    def summary(self) -> dict[str, dict[str, float | None]]:
        """Mean and 95 % half-width of every metric over the replications (half-width None with one)."""
        from scipy.stats import t

        out = {}
        for name in METRICS:
            values = np.array([r[name] for r in self.replications if r[name] is not None], dtype=float)
            if values.size == 0:
                out[name] = {"mean": None, "half_width_95": None}
                continue
            half = float(t.ppf(0.975, values.size - 1) * values.std(ddof=1) / np.sqrt(values.size)) if values.size > 1 else None
            out[name] = {"mean": float(values.mean()), "half_width_95": half}
        return out

    def to_dict(self) -> dict[str, Any]:
        return json_safe({"instance": self.name, "kind": "placement", "method": self.method, "replications": list(self.replications),
                          "summary": self.summary(), "notes": list(self.notes)})

    def text(self) -> str:
        """The report for people, at the output width (optfleet.tables): each replication's metrics, then their means."""
        from optfleet import tables

        lines = [f"instance {self.name}: {self.method}'s placement, {len(self.replications)} replication(s), scored by the simulator"]
        for r in self.replications:
            draw = "the instance's workload" if r["seed"] is None else f"seed {r['seed']}"
            lines.append(f"  {draw}: mean TTFT {r['objective_ms']:,.1f} ms (objective), TTFT p50/p90/p99 "
                         f"{r['p50_ttft_ms']:,.1f}/{r['p90_ttft_ms']:,.1f}/{r['p99_ttft_ms']:,.1f} ms, NTPOT p50 {r['p50_ntpot_ms']:.2f} ms, "
                         f"{r['throughput_tokens_per_s']:,.0f} tok/s, hit {100 * r['prefix_hit_rate']:.1f} %")
        summary = self.summary()
        if len(self.replications) > 1:
            lines.append("  means over the replications, +- the 95 % confidence half-width (Student t):")
        for name, s in summary.items():
            if s["mean"] is not None:
                half = "" if s["half_width_95"] is None else f" +- {numbers.significant(s['half_width_95'])}"
                lines.append(f"  {name}: {numbers.significant(s['mean'])}{half}")
        return tables.page([*lines, *(f"  note: {n}" for n in self.notes)])


def _row(seed: int | None, evaluation) -> dict[str, Any]:
    m = evaluation.overall
    p = m.percentiles_ms
    return {"seed": seed, "objective_ms": evaluation.objective_ms, "p50_ttft_ms": p["ttft"][50], "p90_ttft_ms": p["ttft"][90],
            "p99_ttft_ms": p["ttft"][99], "p50_tpot_ms": p["tpot"][50], "p50_ntpot_ms": p["ntpot"][50], "p90_ntpot_ms": p["ntpot"][90],
            "throughput_tokens_per_s": m.throughput_tokens_per_s, "prefix_hit_rate": m.prefix_hit_rate, "slo_attainment": m.slo_attainment}


def _placement(plan: Any, problem) -> np.ndarray:
    """The ``--plan`` placement (a JSON file's path, a list, ``{"placement": [...]}`` as ``solve --out`` writes it in
    plan.json, or the JSON of ``optfleet solve``, whose first result's placement is taken), checked against
    ``problem``: every InputError names ``--plan``."""
    from optfleet.problems.placement.evaluate import checked_placement

    shape = "a placement is a JSON list of server indices (or {\"placement\": [...]}: plan.json of solve --out, or solve --json output)"
    if isinstance(plan, (str, Path)):
        try:
            plan = json.loads(read_text(Path(plan), "--plan"))
        except RecursionError:
            raise InputError("--plan", str(plan), "cannot read the placement: its JSON is nested too deeply") from None
        except ValueError as exc:
            raise InputError("--plan", str(plan), f"cannot read the placement ({exc})") from exc
    results = plan.get("results") if isinstance(plan, dict) else None
    if isinstance(results, list) and results and isinstance(results[0], dict):
        if "placement" not in results[0]:
            raise InputError("--plan", results[0].get("method"), "the solve output's first result has no placement (a bound or a method "
                             "without a plan)")
        plan = results[0]
    if isinstance(plan, dict):
        if "placement" not in plan:
            raise InputError("--plan", sorted(plan)[:8], f"a mapping needs the key placement ({shape})")
        plan = plan["placement"]
    if not isinstance(plan, (list, tuple, np.ndarray)):
        raise InputError("--plan", type(plan).__name__, shape)
    return checked_placement(plan, len(problem.requests), len(problem.engines), "--plan")


def simulate_instance(loaded, *, method: str | None, plan: Any, progress: Progress, requests: int | None = None, reps: int | None = None,
                      seed: int | None = None, mode: str | None = None) -> PlacementSimulation:
    """The module docstring's replications (``reps`` default 3, ``seed`` default 0); a note names each option given
    that does not apply."""
    from optfleet.api import load
    from optfleet.problems.placement.evaluate import evaluate
    from optfleet.problems.placement.kind import RELAXATION

    problem = loaded.problem
    ignored = [f"--{name}" for name, value in (("requests", requests), ("mode", mode)) if value is not None]
    notes = [f"{' and '.join(ignored)} {'does' if len(ignored) == 1 else 'do'} not apply to placement (the instance's workload, the "
             "continuous-batching simulator)"] if ignored else []
    if plan is not None:
        unused = [f"--{name}" for name, value in (("reps", reps), ("seed", seed)) if value is not None]
        if unused:
            notes.append(f"{' and '.join(unused)} {'does' if len(unused) == 1 else 'do'} not apply to --plan: the placement is scored "
                         "once, on the instance's own workload")
        return PlacementSimulation(problem.name, "--plan", (_row(None, evaluate(problem, _placement(plan, problem))),), tuple(notes))
    if method == RELAXATION:
        raise InputError("--method", method, "is a bound and places nothing; simulate a policy or an exact view with a placement")
    reps = 3 if reps is None else reps
    seed = 0 if seed is None else seed
    if not 1 <= reps <= MAX_REPS:
        raise InputError("--reps", reps, f"must lie in [1, {MAX_REPS}] (beyond it the 95 % interval no longer narrows by its t quantile)")
    if seed < 0:
        raise InputError("--seed", seed, "must be >= 0 (replication i draws the workload with seed --seed + i)")
    if problem.spec.workload.trace is not None:
        reps = 1
        notes.append("a trace is replayed once (no draws)")

    def drawn(i: int):
        """Replication ``i``'s instance; an InputError of its draw says which replication and seed it is."""
        if problem.spec.workload.trace is not None:
            return loaded
        try:
            return load(loaded.instance, workload__seed=seed + i)
        except InputError as exc:
            raise InputError(exc.field, exc.value, f"{exc.problem} (replication {i + 1}, seed {seed + i})") from None

    for i in range(reps):  # every draw is checked before any run: a draw is cheap beside a run (kept, they would hold every workload at once)
        drawn(i)
    rows = []
    for i in range(reps):
        progress(f"{method} seed {seed + i}", i, reps)
        instance = drawn(i)
        (result,) = instance.kind.run(instance.problem, method, progress)
        if result.evaluation is None:  # an exact view that found none (e.g. a time limit before any incumbent)
            raise InfeasibleError(f"{method} found no placement to simulate (replication {i + 1}, seed {seed + i}): {result.note}")
        rows.append(_row(seed + i if problem.spec.workload.trace is None else None, result.evaluation))
    return PlacementSimulation(problem.name, method, tuple(rows), tuple(notes))
