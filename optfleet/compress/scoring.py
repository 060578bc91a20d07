"""The composite sentence score of the Compress-and-Route compressor (Chen et al., FleetOpt, section 5.2 step 2).

``score_i = 0.20 R_i + 0.40 P_i + 0.35 F_i + 0.05 V_i`` over the ``n`` sentences, from their term counts
``c_it`` (:func:`optfleet.compress.text.terms`, one sparse count matrix), the
term frequencies ``f_it = c_it / sum_t c_it`` and the document frequencies ``df_t``:

* TextRank ``R`` (Mihalcea and Tarau, EMNLP 2004): PageRank (scikit-network's power iteration, damping
  0.85, at most 100 iterations, stopping when the L1 change of the rank vector is below 1e-5) over the graph
  of sentences weighted by the cosine of their count vectors.  A sentence with no similar sentence (no edge,
  a dangling node) sends its rank uniformly to every sentence, the standard rule (Page et al. 1999; networkx's
  default; scikit-network's own rule restarts the walk at the node instead).  The iteration runs on the dense
  similarity matrix itself (:func:`textrank`), step for step scikit-network's (tested equal to rounding, and
  to networkx's fixed point within the tolerance's bound): scikit-network's conversions of the dense matrix
  to a sparse, normalised, transposed one cost more than the iteration.  A damped PageRank step contracts the
  L1 distance by 0.85, so the change after ``k`` steps is at most ``2 * 0.85^(k-1)``, below 1e-5 by ``k = 77``:
  always within the 100 iterations.  networkx computes the same fixed point, but building its graph of up to
  125,000 edges took 95 % of the compressor's time (351 of 369 ms at the median).
* position ``P_i = 1 - 0.5 sin(pi t_i)``, ``t_i = i / (n - 1)``: 1 at both ends, 0.5 in the middle (the
  U-shaped attention of "Lost in the Middle", Liu et al., TACL 2024).
* TF-IDF ``F_i = sum_t f_it idf_t`` with ``idf_t = ln((n + 1) / (df_t + 1))`` (Li et al., EMNLP 2023: rare
  terms carry more information).  scikit-learn's smoothed idf is ``ln((1 + n) / (1 + df_t)) + 1``; the
  ``+ 1`` it adds (so that a term in every document is not ignored) is subtracted here, which gives the
  paper's formula exactly: with it every sentence would gain the same ``sum_t f_it = 1``, which after the
  scaling below would flatten the TF-IDF differences.
* novelty ``V_i = 1 - cos(f_i, mean_j f_j)`` (centroid distance, Radev et al., IPM 2004); a sentence
  without terms has cosine 0.

The paper gives the weights, not the scales: ``R``, ``F`` and ``V`` are divided by their maxima (each then
tops at 1, as ``P`` does), so the weights compare like with like (the public semantic-router does the same).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain, count

import numpy as np
from numpy.typing import NDArray
from scipy.sparse import csr_matrix

WEIGHTS = {"textrank": 0.20, "position": 0.40, "tfidf": 0.35, "novelty": 0.05}
DAMPING = 0.85
MAX_ITERATIONS = 100
TOLERANCE = 1e-5
POSITION_DEPTH = 0.5


@dataclass(frozen=True)
class SentenceScores:
    """Each sentence's four component scores, their weighted sum and the cosine similarity of every pair."""

    textrank: NDArray[np.float64]
    position: NDArray[np.float64]
    tfidf: NDArray[np.float64]
    novelty: NDArray[np.float64]
    similarity: NDArray[np.float64]

    @property
    def composite(self) -> NDArray[np.float64]:
        """``0.20 R + 0.40 P + 0.35 F + 0.05 V``."""
        return sum(weight * getattr(self, name) for name, weight in WEIGHTS.items())


def score_sentences(sentences: list[str]) -> SentenceScores:
    """The module docstring's scores of ``sentences`` (at least one)."""
    counts = term_counts(sentences)
    lengths = _row_sums(counts)
    norms = np.sqrt(_row_sums(counts.multiply(counts)))
    frequencies = _row_scaled(counts, lengths)
    similarity = _cosines(_row_scaled(counts, norms))
    return SentenceScores(
        textrank=_scaled(textrank(similarity)),
        position=position_scores(len(sentences)),
        tfidf=_scaled(frequencies @ smoothed_idf(counts)),
        novelty=_scaled(_novelty(frequencies, np.divide(norms, lengths, out=np.zeros_like(norms), where=lengths > 0))),
        similarity=similarity,
    )


def term_counts(sentences: list[str]) -> csr_matrix:
    """The sparse count matrix ``c_it`` of the sentences' :func:`~optfleet.compress.text.terms`, one row a sentence
    and the columns numbered by where a term first occurs in the list of all the terms in order (so columns
    between two terms' numbers are empty; at least one column).

    Built in one go: one vocabulary (a dict) numbers every term in one pass, and the rows of term numbers
    go into scipy's CSR matrix, whose ``sum_duplicates`` counts the repeats.  (scikit-learn's
    ``CountVectorizer`` counts the same, but its per-term Python loop took 12 of the compressor's 48 ms.)"""
    from optfleet.compress.text import terms_of

    found = terms_of(sentences)
    starts = np.zeros(len(found) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, found), dtype=np.int64, count=len(found)), out=starts[1:])
    total = int(starts[-1])
    vocabulary: dict[str, int] = {}
    columns = np.fromiter(map(vocabulary.setdefault, chain.from_iterable(found), count()), dtype=np.int64, count=total)
    counts = csr_matrix((np.ones(total), columns, starts), shape=(len(found), max(total, 1)))
    counts.sum_duplicates()
    return counts


def smoothed_idf(counts: csr_matrix) -> NDArray[np.float64]:
    """``idf_t = ln((n + 1) / (df_t + 1))``: scikit-learn's smoothed idf less the 1 it adds (module docstring)."""
    from sklearn.feature_extraction.text import TfidfTransformer

    return TfidfTransformer(smooth_idf=True).fit(counts).idf_ - 1.0


def textrank(similarity: NDArray[np.float64]) -> NDArray[np.float64]:
    """PageRank of the similarity graph ``A`` (damping ``d`` = 0.85, at most 100 iterations, L1 tolerance 1e-5; a
    dangling sentence links to every sentence), in sentence order, summing to 1.

    The power iteration of scikit-network's ``PageRank(solver="piteration")``, step for step: with the walk
    ``P = D^-1 A`` (``D`` the row sums; a dangling row spread uniformly, ``1/n`` each) and ``r_0 = (1 - d)/n``,

        r' = d P^T r + (1 - d) (sum r) / n,   then r' / sum r',

    stopping at the first step whose L1 change is below the tolerance and returning the iterate before it,
    normalised.  ``P^T r = A^T (r / D)`` plus the dangling rows' mass ``sum_dangling r / n``, so the dense
    matrix is used as it is: one matrix-vector product a step (scikit-network converts the dense matrix to a
    sparse one, normalises and transposes it first: 8-14 ms of the compressor's time at 500 sentences)."""
    n = len(similarity)
    if n == 1:
        return np.ones(1)
    out = similarity.sum(axis=1)
    dangling = out == 0
    inverse = np.divide(1.0, out, out=np.zeros(n), where=~dangling)
    rank = np.full(n, (1.0 - DAMPING) / n)
    for _ in range(MAX_ITERATIONS):
        step = DAMPING * ((rank * inverse) @ similarity + rank[dangling].sum() / n) + (1.0 - DAMPING) / n * rank.sum()
        step /= step.sum()
        if np.abs(rank - step).sum() < TOLERANCE:
            break
        rank = step
    return rank / rank.sum()


def position_scores(n: int) -> NDArray[np.float64]:
    """``1 - 0.5 sin(pi t)`` at ``t = i / (n - 1)`` (``t = 0`` for a single sentence)."""
    t = np.arange(n) / max(n - 1, 1)
    return 1.0 - POSITION_DEPTH * np.sin(np.pi * t)


def _novelty(frequencies: csr_matrix, norms: NDArray[np.float64]) -> NDArray[np.float64]:
    """``1 - cos(f_i, centroid)`` given the rows' norms ``|f_i|``; cosine 0 for a sentence (or centroid) without terms."""
    centroid = (frequencies.T @ np.ones(frequencies.shape[0])) / frequencies.shape[0]
    dots = frequencies @ centroid
    norms = norms * np.linalg.norm(centroid)
    return 1.0 - np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


def _cosines(unit: csr_matrix) -> NDArray[np.float64]:
    """The dense ``n x n`` matrix of the dot products of the unit-length count vectors ``unit`` (their cosines), zero
    on the diagonal (no self-loops)."""
    from sklearn.utils.extmath import safe_sparse_dot

    similarity = safe_sparse_dot(unit, unit.T, dense_output=True)  # scikit-learn >= 1.8 writes the product straight into a dense matrix
    np.fill_diagonal(similarity, 0.0)
    return similarity


def _row_sums(matrix: csr_matrix) -> NDArray[np.float64]:
    """``sum_t m_it`` for each row ``i``."""
    return matrix @ np.ones(matrix.shape[1])


def _row_scaled(matrix: csr_matrix, divisors: NDArray[np.float64]) -> csr_matrix:
    """Each row of ``matrix`` divided by its divisor (rows with divisor 0 stay zero): its stored values scaled in place
    of a product with a diagonal matrix."""
    inverse = np.divide(1.0, divisors, out=np.zeros_like(divisors), where=divisors > 0)
    return csr_matrix((matrix.data * np.repeat(inverse, np.diff(matrix.indptr)), matrix.indices, matrix.indptr), shape=matrix.shape)


def _scaled(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """``values / max(values)`` (unchanged when the maximum is not positive)."""
    top = float(values.max()) if len(values) else 0.0
    return values / top if top > 0 else values
