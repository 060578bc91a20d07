"""TTFT distribution plot of a caching comparison (needs the optional ``plot`` extra, matplotlib)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from optfleet.problems.caching.kind import OPTIMUM
from optfleet.results import MethodResult

if TYPE_CHECKING:
    from optfleet.api import GapOutcome


def plot_ttft_cdf(outcome: "GapOutcome", path: Path) -> None:
    """Write a PNG: per capacity, the empirical CDF of TTFT of every schedule, with ``xi`` and the SLO marked.

    The time axis ends just past the slowest schedule's 99.5th percentile.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problem = outcome.loaded.problem
    comparisons: dict[int, list[MethodResult]] = {}
    for result in outcome.results:
        if result.evaluation is not None:
            comparisons.setdefault(dict(result.group)["capacity_tokens"], []).append(result)
    n = len(comparisons)
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), squeeze=False)
    for ax, (capacity, runs) in zip(axes.flat, comparisons.items(), strict=False):
        for run in runs:
            ttft = np.sort(run.evaluation.ttft_ms)
            share = np.arange(1, ttft.size + 1) / ttft.size
            ax.step(ttft, share, where="post", label=run.method, linewidth=1.2, linestyle="--" if run.method == OPTIMUM else "-")
        ax.axvline(problem.xi_ms, color="grey", linewidth=0.8, linestyle=":")
        if problem.slo_ms != problem.xi_ms:
            ax.axvline(problem.slo_ms, color="black", linewidth=0.8, linestyle=":")
        tail_ms = max(float(np.quantile(run.evaluation.ttft_ms, 0.995)) for run in runs)
        ax.set_xlim(0.0, 1.05 * max(tail_ms, problem.slo_ms, problem.xi_ms))
        ax.set_title(f"capacity {capacity:,} tokens", fontsize=10)
        ax.set_xlabel("TTFT (ms)")
        ax.set_ylabel("share of turns")
        ax.set_ylim(0.0, 1.0)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"{problem.name}: TTFT CDF per policy (dotted: xi = {problem.xi_ms:g} ms; dashed: hindsight optimum)", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
