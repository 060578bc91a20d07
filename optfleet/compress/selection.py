"""Which sentences a compressed prompt keeps: the candidates, the keep rules, the one evaluator and the greedy fill.

A selection ``x in {0,1}^n`` over the candidate sentences is feasible when it keeps the first 3 and last 2
candidates (the primacy/recency invariant, Chen et al., FleetOpt, section 5.2 step 3) and
``sum_i t_i x_i <= T_c`` (``t_i`` the sentence's tokens).  Its value (:func:`selection_value`, the one
evaluator every selection is scored by, greedy or exact) is

    sum_i s_i x_i  +  mu sum_i x_i x_{i+1}  -  lambda sum_{i<j, sim_ij >= theta} sim_ij x_i x_j

with ``s_i`` the composite score, an optional bonus ``mu`` for each pair of adjacent kept sentences
(contiguity: fewer cuts in the text) and an optional penalty ``lambda`` on each pair of kept sentences at
least ``theta`` alike (redundancy, as in McDonald's ILP summariser, ECIR 2007).  The paper's compressor is
``mu = lambda = 0``.

Prompts of more than 500 sentences are cut to 500 candidates first (:func:`candidate_indices`), as the
paper's compressor does to bound TextRank's ``O(n^2)`` graph: the first 3 and last 2 sentences and 495
spread uniformly over the rest; the others are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

MAX_SENTENCES = 500
KEEP_FIRST = 3
KEEP_LAST = 2


@dataclass(frozen=True)
class Objective:
    """What a selection maximises beyond the summed scores: ``mu`` (contiguity), ``lambda`` and ``theta`` (redundancy)."""

    contiguity_bonus: float = 0.0
    redundancy_penalty: float = 0.0
    redundancy_threshold: float = 0.5

    def redundant_pairs(self, similarity: NDArray[np.float64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """The pairs ``i < j`` the redundancy term counts (none without a penalty)."""
        if self.redundancy_penalty <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        first, second = np.nonzero(np.triu(similarity >= self.redundancy_threshold, k=1))
        return first.astype(np.int64), second.astype(np.int64)


def candidate_indices(count: int, cap: int = MAX_SENTENCES) -> NDArray[np.int64]:
    """The sentences scored: all of them up to ``cap``, else the kept ends and ``cap - 5`` spread uniformly between."""
    if count <= cap:
        return np.arange(count)
    middle = np.unique(np.rint(np.linspace(KEEP_FIRST, count - KEEP_LAST - 1, cap - KEEP_FIRST - KEEP_LAST)).astype(np.int64))
    return np.concatenate([np.arange(KEEP_FIRST), middle, np.arange(count - KEEP_LAST, count)])


def keep_mask(count: int) -> NDArray[np.bool_]:
    """The first 3 and the last 2 of ``count`` candidates (all of them when there are 5 or fewer)."""
    keep = np.zeros(count, dtype=bool)
    keep[:KEEP_FIRST] = True
    keep[max(count - KEEP_LAST, 0):] = True
    return keep


def selection_value(chosen: NDArray[np.bool_], scores: NDArray[np.float64], similarity: NDArray[np.float64],
                    objective: Objective) -> float:
    """The module docstring's value of the selection ``chosen``."""
    x = chosen.astype(np.float64)
    value = float(scores @ x)
    if objective.contiguity_bonus:
        value += objective.contiguity_bonus * float(x[:-1] @ x[1:])
    first, second = objective.redundant_pairs(similarity)
    if len(first):
        value -= objective.redundancy_penalty * float(similarity[first, second] @ (x[first] * x[second]))
    return value


def greedy_selection(scores: NDArray[np.float64], tokens: NDArray[np.int64], keep: NDArray[np.bool_], budget_tokens: int,
                     per_token: bool = False) -> NDArray[np.bool_]:
    """The paper's fill: the kept sentences, then the others by falling score (ties: earlier first), each one
    that still fits ``budget_tokens`` (a sentence too long for what is left is passed over, not the end).
    ``per_token`` orders by score per token ``s_i / t_i`` instead: Dantzig's greedy for the knapsack (1957),
    not the paper's, measured beside it."""
    chosen = keep.tolist()
    room = budget_tokens - int(tokens[keep].sum())
    priority = scores / np.maximum(tokens, 1) if per_token else scores
    order = np.lexsort((np.arange(len(scores)), -priority))
    for i, size in zip(order.tolist(), tokens[order].tolist()):
        if size <= room and not chosen[i]:
            chosen[i] = True
            room -= size
    return np.array(chosen, dtype=bool)
