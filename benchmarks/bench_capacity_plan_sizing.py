"""Benchmark: the capacity table of a long horizon (capacity.py), sized per (model, GPU type) against sized per
shared service, in one run.

The capacity table sizes each model on each GPU type at every period's rate with the fleet kind
(``instances_needed``: the ends of runs of equal counts over the sorted distinct rates).  With growing demand every
period's rate is distinct, and on month_ten_models (10 models x 720 hours x 4 types) this sizing is most of
``prepare``.  The baseline sizes each (model, type) alone, as the table did before; the table now sizes models that
share a service and ``tp`` on a type together, over the union of their rates.  Both give the same counts (checked
here, every entry); the table gives the seconds and fleet sizings of each and their ratio.

Writes benchmarks/out/ (benchmarks/results/ with --publish): capacity_plan_sizing.json and capacity_plan_sizing.md.

Run: python benchmarks/bench_capacity_plan_sizing.py [--growth-per-day 0.01] [--publish]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from output import add_output_option, machine_speed, machine_speed_text, output_folder, write_results

ROOT = Path(__file__).resolve().parents[1]
INSTANCE = ROOT / "instances" / "capacity_plan" / "month_ten_models.yaml"
COLUMNS = ("sizing", "(model, type) sizings", "fleet sizings", "seconds", "x baseline seconds", "same counts")


class CountedSizing:
    """capacity._size_at, counting its calls (each is one fleet homogeneous sizing)."""

    def __init__(self, size_at):
        self.size_at, self.calls = size_at, 0

    def __call__(self, problem, rate_rps):
        self.calls += 1
        return self.size_at(problem, rate_rps)


def per_model_type(spec, rates, base_dir) -> np.ndarray:
    """The baseline: every (model, type) prepared and sized alone (instances_needed over its own rates)."""
    from optfleet.problems.capacity_plan.capacity import UNUSABLE, default_tp, instances_needed, service_problem

    out = np.zeros((len(spec.models), len(spec.gpus), spec.periods), dtype=np.int64)
    for m, model in enumerate(spec.models):
        for g, gpu in enumerate(spec.gpus):
            tp = model.tp.get(gpu.name, default_tp(model))
            needed, _ = instances_needed(service_problem(model, gpu, tp, base_dir, f"models[{m}].service"), rates[m])
            out[m, g] = np.where(needed >= 0, np.maximum(needed, model.min_replicas), UNUSABLE)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--growth-per-day", type=float, default=0.01, help="demand.growth_per_day (default 0.01: every rate distinct)")
    add_output_option(parser)
    args = parser.parse_args()
    folder = output_folder(args)
    from optfleet.instance import load_instance
    from optfleet.problems.capacity_plan import capacity
    from optfleet.problems.capacity_plan.demand import generated_rates, grown

    speed = machine_speed()
    loaded = load_instance(INSTANCE, demand__growth_per_day=args.growth_per_day)
    spec = loaded.spec
    names = [m.name for m in spec.models]
    rates = grown(generated_rates(spec.demand.generator, names, spec.periods, spec.period_hours), spec.demand.growth_per_day, spec.period_hours)
    counted = CountedSizing(capacity._size_at)
    capacity._size_at = counted
    results = {}
    for label, run in (("per (model, type): baseline", lambda: per_model_type(spec, rates, loaded.base_dir)),
                       ("per shared service: capacity_table", lambda: capacity.capacity_table(list(spec.models), list(spec.gpus), rates,
                                                                                              loaded.base_dir).instances)):
        counted.calls = 0
        began = time.perf_counter()
        table = run()
        results[label] = (table, time.perf_counter() - began, counted.calls)
    capacity._size_at = counted.size_at
    base, base_s, _ = results["per (model, type): baseline"]
    rows = []
    for label, (table, seconds, calls) in results.items():
        rows.append([label, f"{len(spec.models) * len(spec.gpus)}", f"{calls:,}", f"{seconds:.1f}", f"{seconds / base_s:.2f}",
                     "yes" if np.array_equal(table, base) else "NO"])
        print("  ".join(rows[-1]), flush=True)
    data = {"instance": str(INSTANCE.relative_to(ROOT)), "growth_per_day": args.growth_per_day, "distinct_rates": int(np.unique(rates).size),
            "machine_speed": speed, "rows": [dict(zip(COLUMNS, r, strict=True)) for r in rows]}
    write_results(folder, "capacity_plan_sizing", data, COLUMNS, rows)
    md = folder / "capacity_plan_sizing.md"
    md.write_text(md.read_text() + f"\n{INSTANCE.name} with demand.growth_per_day = {args.growth_per_day:g} ({data['distinct_rates']:,} "
                  f"distinct rates over {len(names)} models x {spec.periods} periods). Machine: {machine_speed_text(speed)}.\n")


if __name__ == "__main__":
    main()
