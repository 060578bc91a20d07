"""How much of a prompt its compression keeps: ROUGE-L recall, TF-IDF cosine and token reduction
(the metrics of Chen et al., FleetOpt, Appendix C, Table 7, less BERTScore, which needs a RoBERTa model).

* ROUGE-L recall ``LCS(original, compressed) / |original|`` over the tokens of the ``rouge-score`` library
  (Lin, 2004; Google's reimplementation of ROUGE-1.5.5: lower-cased ``[a-z0-9]`` runs, no stemming, so
  non-Latin text has no tokens).  The library's LCS is a pure-Python ``O(|a| |b|)`` table (0.9 s for
  2,073 x 1,368 tokens, some 15 s for a 10K-token prompt); the length here comes from the bit-parallel LCS of Crochemore, Iliopoulos, Pinzon and Reid
  (2001) in Hyyrö's form (2004): one bit per original token, for each compressed token ``u = v & M_tok``,
  ``v = (v + u) | (v - u)``; the LCS is the number of zero bits of ``v`` (tested equal to the library's
  ``rougeL`` recall).  For an extractive compression (a subsequence of the original's sentences) it is
  the share of the original's tokens kept.
* TF-IDF cosine: scikit-learn's ``TfidfVectorizer`` (its defaults: smoothed idf, l2 norm) fitted on the
  original's sentences as documents, the cosine of the two texts' vectors.
* token reduction ``1 - tokens(compressed) / tokens(original)`` with the compressor's counter.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from optfleet.compress.text import TokenCounter, approx_tokens, split_sentences


@dataclass(frozen=True)
class Fidelity:
    rouge_l_recall: float
    tfidf_cosine: float | None  # None: the original has no term TF-IDF counts (no word of two letters or digits)
    token_reduction: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def fidelity(original: str, compressed: str, counter: TokenCounter = approx_tokens) -> Fidelity:
    """The module docstring's three metrics of ``compressed`` against ``original``."""
    return Fidelity(rouge_l_recall(original, compressed), tfidf_cosine(original, compressed),
                    1.0 - counter(compressed) / counter(original))


def rouge_l_recall(original: str, compressed: str) -> float:
    """ROUGE-L recall over rouge-score's tokens (0 when the original has none)."""
    from rouge_score.tokenize import tokenize

    reference, candidate = tokenize(original, None), tokenize(compressed, None)
    return lcs_length(reference, candidate) / len(reference) if reference else 0.0


def lcs_length(a: list[str], b: list[str]) -> int:
    """The length of a longest common subsequence of ``a`` and ``b`` (bit-parallel, module docstring)."""
    masks: dict[str, int] = {}
    for i, token in enumerate(a):
        masks[token] = masks.get(token, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for token in b:
        u = v & masks.get(token, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def tfidf_cosine(original: str, compressed: str) -> float | None:
    """The cosine of the two texts' TF-IDF vectors, idf from the original's sentences (0 without shared terms; None
    when the original has no term at all: scikit-learn's tokens are runs of two or more word characters)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    try:
        vectorizer = TfidfVectorizer().fit([s.text for s in split_sentences(original)] or [original])
    except ValueError:  # "empty vocabulary": no token in any sentence
        return None
    first, second = vectorizer.transform([original, compressed])
    return float(first.multiply(second).sum())
