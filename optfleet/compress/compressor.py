"""Compress-and-Route's extractive compressor: a borderline prompt cut to the short pool's budget (Chen et al.,
FleetOpt, section 5).

A request of ``L_total = L_in + L_out`` tokens that does not fit the short pool's budget ``B`` has its prompt
compressed to ``T_c = B - L_out`` tokens, so the compressed request fits exactly (Eq. 15):

    T_c + L_out = B,   tokens(compressed prompt) <= T_c.

Steps (section 5.2): split into sentences (:mod:`optfleet.compress.text`), keep at most 500 candidates,
score them (:mod:`optfleet.compress.scoring`), keep the first 3 and the last 2 and fill the rest of ``T_c``
greedily by score, or exactly (the knapsack MILP, :mod:`optfleet.compress.exact`)
(:mod:`optfleet.compress.selection`).  The kept sentences are joined in their original order, a line break
where the original had one before the sentence, else a space.

Both selections budget the sum of the sentences' token counts.  The guarantee is then checked on the
joined text with the same counter; a counter that is not sub-additive (a real tokenizer may count a joined
text above its parts; the default counter never does) gets the selection redone at a budget lowered by the
overshoot until the joined text fits.

Content-type gate: only prose-like categories are compressed (``prose``, ``rag``, and ``cjk`` prose: the
splitter and the counter read CJK); ``code`` and ``mixed`` (which may hold code) never are: such a request
that does not fit is returned unchanged with ``fits = False`` (it belongs on the long pool).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from optfleet.compress.selection import KEEP_FIRST, KEEP_LAST, Objective, candidate_indices, greedy_selection, keep_mask, selection_value
from optfleet.compress.text import Sentence, TokenCounter, approx_tokens, split_sentences
from optfleet.errors import InputError

CATEGORIES = {"prose": True, "rag": True, "cjk": True, "code": False, "mixed": False}  # category -> compressible
METHODS = ("greedy", "exact")


@dataclass(frozen=True)
class Prompt:
    """A prompt ready to select from: its sentences, the candidates' tokens, scores and keep rules."""

    text: str
    sentences: list[Sentence]
    candidates: NDArray[np.int64]
    tokens: NDArray[np.int64]
    keep: NDArray[np.bool_]
    scores: Any  # optfleet.compress.scoring.SentenceScores

    @property
    def kept_tokens(self) -> int:
        return int(self.tokens[self.keep].sum())

    def join(self, chosen: NDArray[np.bool_]) -> str:
        """The chosen candidates' sentences in order: a line break where the original had one before them, else a space."""
        parts: list[str] = []
        for index in self.candidates[chosen].tolist():
            sentence = self.sentences[index]
            if parts:
                gap = self.text[self.sentences[index - 1].end:sentence.start]
                parts.append("\n" if "\n" in gap else " ")
            parts.append(sentence.text)
        return "".join(parts)


@dataclass(frozen=True)
class Compression:
    """One request through the compressor: the text sent, the token accounts and how the selection was made."""

    text: str
    category: str
    compressed: bool
    fits: bool
    reason: str
    budget_tokens: int
    output_tokens: int
    original_tokens: int
    compressed_tokens: int
    method: str | None = None
    sentences: int | None = None
    candidates: int | None = None
    kept_sentences: list[int] = field(default_factory=list)
    value: float | None = None
    greedy_value: float | None = None
    report: Any = None  # SolveReport of the exact selection
    seconds: float = 0.0

    @property
    def prompt_budget_tokens(self) -> int:
        """``T_c = B - L_out``."""
        return self.budget_tokens - self.output_tokens

    @property
    def token_reduction(self) -> float:
        """``1 - tokens(sent) / tokens(original)``."""
        return 1.0 - self.compressed_tokens / self.original_tokens

    @property
    def greedy_gap_pct(self) -> float | None:
        """``100 (bound - greedy) / bound`` under the exact method (None otherwise)."""
        if self.report is None or self.report.bound is None or self.greedy_value is None:
            return None
        return 100.0 * (self.report.bound - self.greedy_value) / abs(self.report.bound)

    def to_dict(self, with_text: bool = True) -> dict[str, Any]:
        data = {
            "category": self.category, "compressed": self.compressed, "fits": self.fits, "reason": self.reason,
            "budget_tokens": self.budget_tokens, "output_tokens": self.output_tokens,
            "prompt_budget_tokens": self.prompt_budget_tokens, "original_tokens": self.original_tokens,
            "compressed_tokens": self.compressed_tokens, "token_reduction": self.token_reduction, "method": self.method,
            "sentences": self.sentences, "candidates": self.candidates, "kept_sentences": self.kept_sentences,
            "value": self.value, "greedy_value": self.greedy_value, "greedy_gap_pct": self.greedy_gap_pct,
            "solve": None if self.report is None else self.report.to_dict(), "seconds": self.seconds,
        }
        return {**data, "text": self.text} if with_text else data


def compress(text: str, budget_tokens: int, output_tokens: int = 0, *, category: str = "prose", counter: TokenCounter = approx_tokens,
             method: str = "greedy", objective: Objective = Objective(), time_limit_s: float | None = 10.0) -> Compression:
    """``text``, compressed when needed so that ``tokens + output_tokens <= budget_tokens`` (module docstring).

    Raises :class:`InputError` for an empty text, a non-positive budget, ``output_tokens`` outside
    ``[0, budget_tokens)``, an unknown category or method, a non-positive time limit, and, when compression is needed, a text with no
    sentence boundary or a budget below what the first 3 and last 2 sentences need.
    """
    started = time.perf_counter()
    _check(text, budget_tokens, output_tokens, category, method, time_limit_s)
    prompt_budget = budget_tokens - output_tokens
    original = counter(text)
    accounts = dict(category=category, budget_tokens=budget_tokens, output_tokens=output_tokens, original_tokens=original)
    if original <= prompt_budget:
        return Compression(text, compressed=False, fits=True, reason="fits the budget uncompressed", compressed_tokens=original,
                           seconds=time.perf_counter() - started, **accounts)
    if not CATEGORIES[category]:
        return Compression(text, compressed=False, fits=False, compressed_tokens=original, seconds=time.perf_counter() - started,
                           reason=f"category {category} is never compressed (content-type gate): the request needs the long pool",
                           **accounts)
    prompt = prepare(text, counter)
    if prompt.kept_tokens > prompt_budget:
        joined = counter(prompt.join(prompt.keep))
        raise InputError("budget_tokens", budget_tokens,
                         f"the first {KEEP_FIRST} and last {KEEP_LAST} sentences are always kept and the selection counts them "
                         f"sentence by sentence: {prompt.kept_tokens} tokens ({joined} joined); with output_tokens {output_tokens} "
                         f"the budget must be at least {prompt.kept_tokens + output_tokens}")
    chosen, report, greedy, sent, sent_tokens = _select(prompt, budget_tokens, prompt_budget, counter, method, objective, time_limit_s)
    composite = prompt.scores.composite
    return Compression(sent, compressed=True, fits=True, reason=f"compressed to T_c = B - L_out = {prompt_budget} tokens",
                       compressed_tokens=sent_tokens, method=method, sentences=len(prompt.sentences),
                       candidates=len(prompt.candidates), kept_sentences=prompt.candidates[chosen].tolist(),
                       value=selection_value(chosen, composite, prompt.scores.similarity, objective),
                       greedy_value=selection_value(greedy, composite, prompt.scores.similarity, objective),
                       report=report, seconds=time.perf_counter() - started, **accounts)


def prepare(text: str, counter: TokenCounter = approx_tokens) -> Prompt:
    """Split ``text``, cap it at 500 candidates, count and score them (InputError without a sentence boundary)."""
    from optfleet.compress.scoring import score_sentences

    sentences = split_sentences(text)
    if len(sentences) < 2:
        raise InputError("text", text, "has no sentence boundary (. ! ? 。 or a blank line): there is nothing to select from")
    candidates = candidate_indices(len(sentences))
    chosen_text = [sentences[i].text for i in candidates.tolist()]
    tokens = np.array(list(map(counter, chosen_text)), dtype=np.int64)
    return Prompt(text, sentences, candidates, tokens, keep_mask(len(candidates)), score_sentences(chosen_text))


def select(prompt: Prompt, budget_tokens: int, method: str, objective: Objective = Objective(), time_limit_s: float | None = 10.0):
    """``(selection, SolveReport or None, greedy selection)`` at ``budget_tokens`` (summed sentence tokens); the exact
    method starts HiGHS from the better of the paper's greedy and the score-per-token greedy."""
    composite = prompt.scores.composite
    greedy = greedy_selection(composite, prompt.tokens, prompt.keep, budget_tokens)
    if method == "greedy":
        return greedy, None, greedy
    from optfleet.compress.exact import exact_selection

    by_density = greedy_selection(composite, prompt.tokens, prompt.keep, budget_tokens, per_token=True)
    start = max((greedy, by_density), key=lambda chosen: selection_value(chosen, composite, prompt.scores.similarity, objective))
    chosen, report = exact_selection(composite, prompt.tokens, prompt.keep, budget_tokens, prompt.scores.similarity, objective,
                                     time_limit_s=time_limit_s, start=start)
    return (greedy if chosen is None else chosen), report, greedy


def _select(prompt: Prompt, budget_tokens: int, prompt_budget: int, counter: TokenCounter, method: str, objective: Objective, time_limit_s: float | None):
    """:func:`select`, redone at a lower budget while the joined text counts above ``T_c`` (module docstring); with
    the joined text and its count."""
    budget = prompt_budget
    while True:
        chosen, report, greedy = select(prompt, budget, method, objective, time_limit_s)
        sent = prompt.join(chosen)
        sent_tokens = counter(sent)
        overshoot = sent_tokens - prompt_budget
        if overshoot <= 0:
            return chosen, report, greedy, sent, sent_tokens
        budget -= overshoot
        if budget < prompt.kept_tokens:
            raise InputError("budget_tokens", budget_tokens,
                             f"the token counter counts the first {KEEP_FIRST} and last {KEEP_LAST} sentences, joined, above T_c = {prompt_budget}")


def _check(text: str, budget_tokens: int, output_tokens: int, category: str, method: str, time_limit_s: float | None) -> None:
    if not text.strip():
        raise InputError("text", text, "is empty: there is nothing to compress")
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, (int, np.integer)) or budget_tokens <= 0:
        raise InputError("budget_tokens", budget_tokens, "must be a whole number of tokens > 0")
    if isinstance(output_tokens, bool) or not isinstance(output_tokens, (int, np.integer)) or output_tokens < 0:
        raise InputError("output_tokens", output_tokens, "must be a whole number of tokens >= 0")
    if output_tokens >= budget_tokens:
        raise InputError("output_tokens", output_tokens, f"leaves no prompt budget: T_c = B - L_out = {budget_tokens - output_tokens} <= 0")
    if category not in CATEGORIES:
        raise InputError("category", category, f"is not one of {', '.join(CATEGORIES)}")
    if method not in METHODS:
        raise InputError("method", method, f"is not one of {', '.join(METHODS)}")
    if time_limit_s is not None and not time_limit_s > 0:
        raise InputError("time_limit_s", time_limit_s, "must be > 0 seconds")
