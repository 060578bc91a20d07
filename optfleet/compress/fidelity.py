"""How much of a prompt its compression keeps: ROUGE-L recall, TF-IDF cosine and token reduction
(the metrics of Chen et al., FleetOpt, Appendix C, Table 7, less BERTScore, which needs a RoBERTa model).

* ROUGE-L recall ``LCS(original, compressed) / |original|`` over the tokens of the ``rouge-score`` library
  (Lin, 2004; Google's reimplementation of ROUGE-1.5.5: lower-cased ``[a-z0-9]`` runs, no stemming, so
  non-Latin text has no tokens).  The library's LCS is a pure-Python ``O(|a| |b|)`` table (0.9 s for
  2,073 x 1,368 tokens, some 15 s for a 10K-token prompt).  Here:

  - when the compressed tokens are a subsequence of the original's (always, for an extractive compression: its
    sentences are the original's, in order), the LCS is their count, found by one linear scan (exact; under a
    second for a 50 MB prompt);
  - otherwise the bit-parallel LCS of Crochemore, Iliopoulos, Pinzon and Reid (2001) in Hyyrö's form (2004): one
    bit per original token, for each compressed token ``u = v & M_tok``, ``v = (v + u) | (v - u)``; the LCS is the
    number of zero bits of ``v`` (tested equal to the library's ``rougeL`` recall).  Its work and its masks grow
    with ``|a| x |b|`` and ``|a| x`` (distinct tokens of ``b``), so above :data:`MAX_LCS_PAIRS` of either it is
    not computed (None) and the notes say why: a 4 MB prompt's masks alone took more than 4 GB.

* TF-IDF cosine: scikit-learn's ``TfidfVectorizer`` (its defaults: smoothed idf, l2 norm) fitted on the
  original's sentences as documents, the cosine of the two texts' vectors.  Above :data:`MAX_TFIDF_SENTENCES`
  sentences the idf is fitted on a systematic sample of them (every k-th sentence, k the smallest that keeps at
  most that many), and the notes say so; the two vectors are still the whole texts'.
* token reduction ``1 - tokens(compressed) / tokens(original)`` with the compressor's counter.

``Fidelity.notes`` names, for each metric computed other than in full, what was done, on what size, and why.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from optfleet.compress.text import TokenCounter, approx_tokens, split_sentences

MAX_LCS_PAIRS = 2_000_000_000
"""Token pairs (``|a| x |b|``, or ``|a| x`` distinct compressed tokens for the masks) above which the bit-parallel
LCS is not run: about a second of work and 250 MB of masks here (one-off measurement: 6.8e9 pairs took 3.2 s)."""

MAX_TFIDF_SENTENCES = 20_000
"""Sentences of the original the TF-IDF idf is fitted on; more are sampled systematically (fitting 564,101 sentences
of a 50 MB prompt took 5.2 s here, 20,000 about 0.2 s)."""

_ROUGE_TOKEN = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Fidelity:
    rouge_l_recall: float | None  # None: the LCS was too large to compute (notes)
    tfidf_cosine: float | None  # None: the original has no term TF-IDF counts (no word of two letters or digits)
    token_reduction: float
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        return data


def fidelity(original: str, compressed: str, counter: TokenCounter = approx_tokens) -> Fidelity:
    """The module docstring's three metrics of ``compressed`` against ``original``, with the notes of any bound."""
    recall, rouge_note = rouge_l(original, compressed)
    cosine, tfidf_note = tfidf(original, compressed)
    notes = tuple(note for note in (rouge_note, tfidf_note) if note)
    return Fidelity(recall, cosine, 1.0 - counter(compressed) / counter(original), notes)


def rouge_tokens(text: str) -> list[str]:
    """rouge-score's tokens (``rouge_score.tokenize.tokenize(text, None)``: lower-cased, every run of characters
    outside ``[a-z0-9]`` a separator), in one regex pass."""
    return _ROUGE_TOKEN.findall(text.lower())


def rouge_l_recall(original: str, compressed: str) -> float | None:
    """ROUGE-L recall over rouge-score's tokens (0 when the original has none; None when too large, see
    :func:`rouge_l`)."""
    return rouge_l(original, compressed)[0]


def rouge_l(original: str, compressed: str) -> tuple[float | None, str | None]:
    """ROUGE-L recall (module docstring) and a note when it is not the exact LCS computed in full (None otherwise)."""
    reference, candidate = rouge_tokens(original), rouge_tokens(compressed)
    if not reference:
        return 0.0, None
    pairs = len(reference) * max(len(candidate), len(set(candidate)))
    if is_subsequence(candidate, reference):
        note = None if pairs <= MAX_LCS_PAIRS else (
            f"ROUGE-L recall exact in one scan of the original's {len(reference):,} tokens: the compressed text's {len(candidate):,} "
            f"are a subsequence of them (an extract), so the LCS is their count; the full LCS would need {pairs:,} token pairs, "
            f"above the limit of {MAX_LCS_PAIRS:,}")
        return len(candidate) / len(reference), note
    if pairs > MAX_LCS_PAIRS:
        return None, (f"ROUGE-L recall not computed: the compressed text ({len(candidate):,} tokens) is not a subsequence of the original "
                      f"({len(reference):,} tokens) and their LCS needs {pairs:,} token pairs, above the limit of {MAX_LCS_PAIRS:,}")
    return lcs_length(reference, candidate) / len(reference), None


def is_subsequence(short: list[str], long: list[str]) -> bool:
    """Whether ``short`` is ``long`` with some items left out (one greedy scan: the LCS is then ``len(short)``)."""
    remaining = iter(long)
    return all(token in remaining for token in short)


def lcs_length(a: list[str], b: list[str]) -> int:
    """The length of a longest common subsequence of ``a`` and ``b`` (bit-parallel, module docstring)."""
    wanted = set(b)
    masks: dict[str, int] = {}
    for i, token in enumerate(a):
        if token in wanted:
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
    return tfidf(original, compressed)[0]


def tfidf(original: str, compressed: str) -> tuple[float | None, str | None]:
    """:func:`tfidf_cosine` and a note when its idf was fitted on a sample of the sentences (module docstring)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    sentences = [s.text for s in split_sentences(original)] or [original]
    step = math.ceil(len(sentences) / MAX_TFIDF_SENTENCES)
    note = None
    if step > 1:
        note = (f"TF-IDF cosine: idf fitted on a systematic sample of {len(sentences[::step]):,} of the original's {len(sentences):,} "
                f"sentences (one in {step}; the limit is {MAX_TFIDF_SENTENCES:,}); the two vectors are the whole texts'")
        sentences = sentences[::step]
    try:
        vectorizer = TfidfVectorizer().fit(sentences)
    except ValueError:  # "empty vocabulary": no token in any sentence
        return None, None
    first, second = vectorizer.transform([original, compressed])
    return float(first.multiply(second).sum()), note
