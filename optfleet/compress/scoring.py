"""The composite sentence score of the Compress-and-Route compressor (Chen et al., FleetOpt, section 5.2 step 2).

``score_i = 0.20 R_i + 0.40 P_i + 0.35 F_i + 0.05 V_i`` over the ``n`` sentences, from their term counts
``c_it`` (:func:`optfleet.compress.text.terms`, counted by scikit-learn's ``CountVectorizer``), the
term frequencies ``f_it = c_it / sum_t c_it`` and the document frequencies ``df_t``:

* TextRank ``R`` (Mihalcea and Tarau, EMNLP 2004): PageRank (scikit-network's power iteration, damping
  0.85, at most 100 iterations, stopping when the L1 change of the rank vector is below 1e-5) over the graph
  of sentences weighted by the cosine of their count vectors.  A sentence with no similar sentence (no edge,
  a dangling node) sends its rank uniformly to every sentence, the standard rule (Page et al. 1999; networkx's
  default): written into the graph as a row of equal weights, since scikit-network's own rule for a
  dangling node differs (it restarts the walk at the node instead).  A damped PageRank step contracts the L1
  distance by 0.85, so the change after ``k`` steps is at most ``2 * 0.85^(k-1)``, below 1e-5 by ``k = 77``:
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

import numpy as np
from numpy.typing import NDArray

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
    lengths = np.asarray(counts.sum(axis=1), dtype=np.float64).ravel()
    frequencies = _row_scaled(counts, lengths)
    similarity = _cosines(counts)
    return SentenceScores(
        textrank=_scaled(textrank(similarity)),
        position=position_scores(len(sentences)),
        tfidf=_scaled(np.asarray(frequencies @ smoothed_idf(counts), dtype=np.float64).ravel()),
        novelty=_scaled(_novelty(frequencies)),
        similarity=similarity,
    )


def term_counts(sentences: list[str]):
    """The sparse ``n x terms`` count matrix (scikit-learn's ``CountVectorizer`` over :func:`terms`); a
    single all-zero column when no sentence has a term."""
    from scipy.sparse import csr_matrix
    from sklearn.feature_extraction.text import CountVectorizer

    from optfleet.compress.text import terms

    try:
        return CountVectorizer(analyzer=terms, dtype=np.float64).fit_transform(sentences).tocsr()
    except ValueError:  # "empty vocabulary": punctuation only
        return csr_matrix((len(sentences), 1), dtype=np.float64)


def smoothed_idf(counts) -> NDArray[np.float64]:
    """``idf_t = ln((n + 1) / (df_t + 1))``: scikit-learn's smoothed idf less the 1 it adds (module docstring)."""
    from sklearn.feature_extraction.text import TfidfTransformer

    return TfidfTransformer(smooth_idf=True).fit(counts).idf_ - 1.0


def textrank(similarity: NDArray[np.float64]) -> NDArray[np.float64]:
    """PageRank of the similarity graph (scikit-network, damping 0.85, <= 100 iterations, L1 tolerance 1e-5; a
    dangling sentence links to every sentence), in sentence order, summing to 1."""
    from sknetwork.ranking import PageRank

    n = len(similarity)
    if n == 1:
        return np.ones(1)
    adjacency = similarity.copy()
    adjacency[~adjacency.any(axis=1)] = 1.0
    ranking = PageRank(damping_factor=DAMPING, solver="piteration", n_iter=MAX_ITERATIONS, tol=TOLERANCE)
    return np.asarray(ranking.fit_predict(adjacency), dtype=np.float64)


def position_scores(n: int) -> NDArray[np.float64]:
    """``1 - 0.5 sin(pi t)`` at ``t = i / (n - 1)`` (``t = 0`` for a single sentence)."""
    t = np.arange(n) / max(n - 1, 1)
    return 1.0 - POSITION_DEPTH * np.sin(np.pi * t)


def _novelty(frequencies) -> NDArray[np.float64]:
    """``1 - cos(f_i, centroid)``; cosine 0 for a sentence (or centroid) without terms."""
    centroid = np.asarray(frequencies.mean(axis=0), dtype=np.float64).ravel()
    dots = np.asarray(frequencies @ centroid, dtype=np.float64).ravel()
    norms = np.sqrt(np.asarray(frequencies.multiply(frequencies).sum(axis=1), dtype=np.float64).ravel()) * np.linalg.norm(centroid)
    return 1.0 - np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


def _cosines(counts) -> NDArray[np.float64]:
    """The dense ``n x n`` cosine similarity of the count vectors, zero on the diagonal (no self-loops)."""
    norms = np.sqrt(np.asarray(counts.multiply(counts).sum(axis=1), dtype=np.float64).ravel())
    unit = _row_scaled(counts, norms)
    similarity = np.asarray((unit @ unit.T).todense(), dtype=np.float64)
    np.fill_diagonal(similarity, 0.0)
    return similarity


def _row_scaled(matrix, divisors: NDArray[np.float64]):
    """Each row of the sparse ``matrix`` divided by its divisor (rows with divisor 0 stay zero)."""
    from scipy.sparse import diags

    inverse = np.divide(1.0, divisors, out=np.zeros_like(divisors), where=divisors > 0)
    return diags(inverse) @ matrix


def _scaled(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """``values / max(values)`` (unchanged when the maximum is not positive)."""
    top = float(values.max()) if len(values) else 0.0
    return values / top if top > 0 else values
