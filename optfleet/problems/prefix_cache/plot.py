"""Hit rate and P99 TTFT against capacity, one line per policy, the hindsight optimum or bound as a dashed black line
(needs the optional ``plot`` extra, matplotlib)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optfleet.problems.prefix_cache.schema import LP_BOUND_METHOD, OPTIMUM_METHOD

if TYPE_CHECKING:
    from optfleet.api import GapOutcome


@dataclass(frozen=True)
class Curve:
    """One line: a label, capacities in blocks, and the hit rate (0..1) and P99 TTFT (ms, None: not drawn) at each."""

    label: str
    capacities_blocks: Sequence[int]
    hit_rate: Sequence[float]
    p99_ttft_ms: Sequence[float] | None


def draw_capacity_curves(hit_ax: Any, p99_ax: Any, policies: Sequence[Curve], reference: Curve | None, title: str, block_tokens: int) -> None:
    """Draw the policies' curves on two axes, ``reference`` (the optimum or a bound) dashed black."""
    for curve in policies:
        hit_ax.plot(curve.capacities_blocks, [100 * h for h in curve.hit_rate], marker="o", label=curve.label)
        if curve.p99_ttft_ms is not None:
            p99_ax.plot(curve.capacities_blocks, curve.p99_ttft_ms, marker="o", label=curve.label)
    if reference is not None:
        hit_ax.plot(reference.capacities_blocks, [100 * h for h in reference.hit_rate], "k--", label=reference.label)
        if reference.p99_ttft_ms is not None:
            p99_ax.plot(reference.capacities_blocks, reference.p99_ttft_ms, "k--", label=reference.label)
    for ax, ylabel in ((hit_ax, "hit rate (% of prompt tokens)"), (p99_ax, "P99 TTFT (ms)")):
        ax.set(xscale="log", xlabel=f"capacity ({block_tokens}-token blocks)", ylabel=ylabel, title=title)
        capacities = sorted({c for curve in policies for c in curve.capacities_blocks})
        ax.set_xticks(capacities, [f"{c:,}" for c in capacities])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
    hit_ax.legend(fontsize=8)


def plot_capacity_curves(outcome: "GapOutcome", path: Path) -> None:
    """Write a PNG of a gap's results: every policy's hit rate and P99 TTFT per capacity, the optimum dashed (the LP
    relaxation's rounded schedule is left out: it is a by-product of the bound, not a policy)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problem = outcome.loaded.problem
    by_method: dict[str, list[Any]] = {}
    for result in outcome.results:
        if result.evaluation is not None:
            by_method.setdefault(result.method, []).append(result)

    def curve(label: str, results: list[Any]) -> Curve:
        results = sorted(results, key=lambda r: dict(r.group)["capacity_blocks"])
        return Curve(label, [dict(r.group)["capacity_blocks"] for r in results], [r.evaluation.hit_rate for r in results],
                     [r.evaluation.percentile_ttft_ms[99] for r in results])

    optimum = by_method.pop(OPTIMUM_METHOD, None)
    by_method.pop(LP_BOUND_METHOD, None)
    fig, (hit_ax, p99_ax) = plt.subplots(1, 2, figsize=(10, 3.8))
    draw_capacity_curves(hit_ax, p99_ax, [curve(m, rs) for m, rs in by_method.items()],
                         None if optimum is None else curve(f"hindsight optimum ({problem.objective})", optimum), problem.name,
                         problem.trace.block_tokens)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
