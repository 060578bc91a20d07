"""The request mix: a finite distribution over ``(L_in, L_out)`` pairs.

Every workload source (a CDF table of ``L_total``, or a request trace) becomes
a :class:`RequestMix` — atoms ``(l_in, l_out)`` with probabilities, sorted by
``L_total`` — and every pool statistic the evaluator and the sweep use is an
exact finite sum over those atoms (FleetOpt, Chen et al. 2026: no Monte-Carlo).

Input/output split rules (FleetOpt, Chen et al. 2026) applied to a total length L:

* ``from_trace``: the trace's own ``(l_in, l_out)`` pairs;
* ``fixed_output_fraction(f)``: ``L_out = clip(round(f L), 1, L - 1)`` (the
  peer simulator inference-fleet-sim uses f = 0.2); ``L = 1`` is one input token;
* ``output_fraction_normal(mu, sd)``: ``L_out = clip(round(r L), 1, L - 1)``
  with ``r ~ N(mu, sd)`` clipped to [0.02, 0.95] (token-budget routing paper:
  0.10/0.05 Azure, 0.75/0.10 LMSYS).  The normal is integrated by a
  deterministic K-node equal-probability quadrature (node k at the quantile
  ``(k + 1/2)/K`` of the clipped normal, weight 1/K; K = 16 by default).
  This rule is therefore a deterministic discretisation of the normal, not an
  exact integral; the other two are exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

NORMAL_FRACTION_CLIP = (0.02, 0.95)


@dataclass(frozen=True)
class RequestMix:
    """Atoms ``(l_in, l_out)`` with probabilities summing to 1, sorted by ``l_total`` then ``l_out``."""

    l_in: NDArray[np.int64]
    l_out: NDArray[np.int64]
    prob: NDArray[np.float64]

    @property
    def l_total(self) -> NDArray[np.int64]:
        return self.l_in + self.l_out

    @property
    def max_total_tokens(self) -> int:
        return int(self.l_total[-1])

    def mass_at_most(self, tokens: float) -> float:
        """``P[L_total <= tokens]``."""
        return float(self.prob[self.l_total <= tokens].sum())

    def mean_total_tokens(self) -> float:
        return float(np.dot(self.prob, self.l_total))

    @classmethod
    def from_pairs(cls, l_in: NDArray[np.int64], l_out: NDArray[np.int64], weight: NDArray[np.float64]) -> "RequestMix":
        """Merge equal pairs, normalise the weights and sort by ``(l_total, l_out)``."""
        l_in = np.asarray(l_in, dtype=np.int64)
        l_out = np.asarray(l_out, dtype=np.int64)
        keys = np.stack([l_in + l_out, l_out])
        unique, inverse = np.unique(keys, axis=1, return_inverse=True)
        merged = np.bincount(inverse.ravel(), weights=np.asarray(weight, dtype=np.float64))
        total, out = unique
        return cls(l_in=total - out, l_out=out, prob=merged / merged.sum())


def split_fixed_fraction(l_total: NDArray[np.int64], output_fraction: float) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``L_out = clip(round(f L), 1, L - 1)``, ``L_in = L - L_out``; returns ``(l_in, l_out)``."""
    l_total = np.asarray(l_total, dtype=np.int64)
    l_out = np.floor(output_fraction * l_total + 0.5).astype(np.int64)
    l_out = np.clip(l_out, 1, np.maximum(l_total - 1, 0))
    return l_total - l_out, l_out


def split_normal_fraction(
    l_total: NDArray[np.int64],
    weight: NDArray[np.float64],
    mean: float,
    sd: float,
    nodes: int = 16,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """Apply ``fixed_output_fraction`` at each quadrature node of the clipped normal.

    Returns ``(l_in, l_out, weight)`` with ``nodes`` atoms per input length.
    """
    levels = (np.arange(nodes) + 0.5) / nodes
    from scipy import stats  # imported here: scipy.stats costs 0.4 s of start-up and only this split needs it

    fractions = np.clip(mean + sd * stats.norm.ppf(levels), *NORMAL_FRACTION_CLIP) if sd > 0 else np.clip(np.full(nodes, mean), *NORMAL_FRACTION_CLIP)
    pairs = [split_fixed_fraction(l_total, f) for f in fractions]
    l_in = np.concatenate([p[0] for p in pairs])
    l_out = np.concatenate([p[1] for p in pairs])
    return l_in, l_out, np.tile(np.asarray(weight, dtype=np.float64) / nodes, nodes)
