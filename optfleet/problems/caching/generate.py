"""Seeded generator of conversation traces from the paper's stochastic model.

Model (Tail-Optimized Caching for LLM Inference, section 3, "a natural
stochastic model of conversation dynamics"):

* conversations are born as a Poisson process of rate ``lambda_conv``
  (``conversation_rate_per_s``);
* **the first turn arrives at birth** (this module's convention);
* while a conversation is alive its further turns arrive as a Poisson process
  of rate ``lambda_turn`` (``turn_rate_per_s``), and its life ends after an
  ``Exp(mu)`` time (``end_rate_per_s``);
* prompt and answer lengths are drawn independently per turn from a
  :class:`LengthModel`.

Sampling is exact and vectorised through the competing-exponentials view of
the model: after each turn the next event (another turn at rate ``lambda``,
or the end at rate ``mu``) comes after an ``Exp(lambda + mu)`` time and is a
turn with probability ``lambda / (lambda + mu)``, independently of that time.
Hence the number of turns is ``1 + Geometric`` with
``P(N = 1 + k) = (lambda/(lambda+mu))^k mu/(lambda+mu)``, so
``E[N] = 1 + lambda/mu``, and every observed inter-turn gap is
``Exp(lambda + mu)`` with mean ``1 / (lambda + mu)``.
:meth:`ConversationModel.from_summary` inverts these two relations, so a
model can be stated by its observable mean turns and mean gap instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.instance.shared_schema import MAX_TOKENS
from optfleet.problems.caching.schema import MAX_GENERATED_TURNS
from optfleet.problems.caching.trace import ConversationTrace, build_trace

Distribution = Literal["constant", "geometric", "lognormal", "empirical"]


@dataclass(frozen=True)
class LengthModel:
    """Distribution of a per-turn token count (prompt or answer); every draw is >= 1 token.

    * ``constant``: always ``round(mean_tokens)``;
    * ``geometric``: on ``{1, 2, ...}`` with success probability ``1 / mean_tokens``
      (mean exactly ``mean_tokens``);
    * ``lognormal``: ``max(1, round(X))`` with ``ln X ~ N(ln m - sigma^2/2, sigma^2)``,
      so ``E[X] = m = mean_tokens`` (rounding and the floor at 1 move the mean
      by well under 1 % for ``m >= 20``);
    * ``empirical``: ``values_tokens`` drawn with probabilities proportional to
      ``weights`` (uniform when no weights are given).
    """

    distribution: Distribution
    mean_tokens: float = 0.0
    sigma: float = 1.0
    values_tokens: tuple[int, ...] = ()
    weights: tuple[float, ...] = ()
    field: str = "lengths"

    def __post_init__(self) -> None:
        if self.distribution == "empirical":
            if not self.values_tokens:
                raise InputError(f"{self.field}.values_tokens", list(self.values_tokens), "an empirical table needs at least one value")
            bad = [v for v in self.values_tokens if v < 1]
            if bad:
                raise InputError(f"{self.field}.values_tokens", bad[0], "token counts must be >= 1")
            if self.weights and len(self.weights) != len(self.values_tokens):
                raise InputError(f"{self.field}.weights", list(self.weights), f"needs one weight per value ({len(self.values_tokens)})")
            if self.weights and (min(self.weights) < 0 or sum(self.weights) <= 0):
                raise InputError(f"{self.field}.weights", list(self.weights), "weights must be >= 0 with a positive sum")
        elif not (math.isfinite(self.mean_tokens) and self.mean_tokens >= 1):
            raise InputError(f"{self.field}.mean_tokens", self.mean_tokens, "must be >= 1")
        if self.distribution == "lognormal" and not (math.isfinite(self.sigma) and self.sigma > 0):
            raise InputError(f"{self.field}.sigma", self.sigma, "must be > 0")

    @property
    def expected_tokens(self) -> float:
        """The model's mean (for ``lognormal``: of ``X`` before rounding and the floor at 1)."""
        if self.distribution == "empirical":
            values = np.asarray(self.values_tokens, dtype=float)
            return float(np.average(values, weights=self._probabilities()))
        if self.distribution == "constant":
            return float(max(1, round(self.mean_tokens)))
        return float(self.mean_tokens)

    def sample(self, rng: np.random.Generator, size: int) -> NDArray[np.int64]:
        """``size`` independent draws (int64, each >= 1)."""
        if self.distribution == "constant":
            return np.full(size, max(1, round(self.mean_tokens)), dtype=np.int64)
        if self.distribution == "geometric":
            return rng.geometric(1.0 / self.mean_tokens, size).astype(np.int64)
        if self.distribution == "lognormal":
            log_mean = math.log(self.mean_tokens) - self.sigma**2 / 2
            return np.maximum(1, np.rint(rng.lognormal(log_mean, self.sigma, size))).astype(np.int64)
        values = np.asarray(self.values_tokens, dtype=np.int64)
        return values[rng.choice(len(values), size=size, p=self._probabilities())]

    def _probabilities(self) -> NDArray[np.float64]:
        w = np.asarray(self.weights if self.weights else [1.0] * len(self.values_tokens), dtype=float)
        return w / w.sum()


@dataclass(frozen=True)
class ConversationModel:
    """The stochastic conversation model: birth rate, turn rate while alive, end rate, lengths.

    Rates are per second.  ``end_rate_per_s`` (``mu``) must be > 0 so that every
    conversation ends; ``turn_rate_per_s = 0`` gives single-turn conversations.
    """

    conversation_rate_per_s: float
    turn_rate_per_s: float
    end_rate_per_s: float
    prompt: LengthModel
    answer: LengthModel
    field: str = "generator"

    def __post_init__(self) -> None:
        for name, value, low in (("conversation_rate_per_s", self.conversation_rate_per_s, 0.0),
                                 ("end_rate_per_s", self.end_rate_per_s, 0.0)):
            if not (math.isfinite(value) and value > low):
                raise InputError(f"{self.field}.{name}", value, "must be > 0")
        if not (math.isfinite(self.turn_rate_per_s) and self.turn_rate_per_s >= 0):
            raise InputError(f"{self.field}.turn_rate_per_s", self.turn_rate_per_s, "must be >= 0")

    @classmethod
    def from_summary(cls, conversation_rate_per_s: float, mean_turns: float, mean_gap_s: float,
                     prompt: LengthModel, answer: LengthModel, field: str = "generator") -> "ConversationModel":
        """The model with the given mean turns per conversation and mean inter-turn gap.

        Solves ``1 + lambda/mu = mean_turns`` and ``1/(lambda + mu) = mean_gap_s``:
        ``mu = 1 / (mean_gap_s * mean_turns)``, ``lambda = (mean_turns - 1) mu``.
        """
        if not (math.isfinite(mean_turns) and mean_turns >= 1):
            raise InputError(f"{field}.mean_turns", mean_turns, "must be >= 1")
        if not (math.isfinite(mean_gap_s) and mean_gap_s > 0):
            raise InputError(f"{field}.mean_gap_s", mean_gap_s, "must be > 0")
        mu = 1.0 / (mean_gap_s * mean_turns)
        return cls(conversation_rate_per_s, (mean_turns - 1.0) * mu, mu, prompt, answer, field)

    @property
    def mean_turns(self) -> float:
        """``E[N] = 1 + lambda / mu``."""
        return 1.0 + self.turn_rate_per_s / self.end_rate_per_s

    @property
    def mean_gap_s(self) -> float:
        """Mean observed inter-turn gap, ``1 / (lambda + mu)``."""
        return 1.0 / (self.turn_rate_per_s + self.end_rate_per_s)


def generate_trace(model: ConversationModel, conversations: int, seed: int) -> ConversationTrace:
    """Draw ``conversations`` conversations of ``model`` with ``numpy``'s PCG64 seeded by ``seed``.

    The same (model, conversations, seed) always gives the same trace.  The
    expected number of turns is ``conversations * model.mean_turns``; all
    draws are vectorised (about a second per million turns, most of it in
    :func:`build_trace`).  Conversation labels are ``0..conversations-1`` in
    order of birth.  A trace expected to exceed :data:`MAX_GENERATED_TURNS` turns or
    :data:`~optfleet.instance.shared_schema.MAX_TOKENS` tokens is refused before any draw.
    """
    if conversations < 1:
        raise InputError(f"{model.field}.conversations", conversations, "must be >= 1")
    _check_expected_size(model, conversations)
    rng = np.random.default_rng(seed)
    births_s = np.cumsum(rng.exponential(1.0 / model.conversation_rate_per_s, conversations))
    continue_p = model.turn_rate_per_s / (model.turn_rate_per_s + model.end_rate_per_s)
    turns = rng.geometric(1.0 - continue_p, conversations).astype(np.int64)  # 1 + Geometric(k >= 0)
    total = int(turns.sum())
    conversation = np.repeat(np.arange(conversations, dtype=np.int64), turns)
    first = np.cumsum(turns) - turns
    gaps_s = rng.exponential(model.mean_gap_s, total)
    gaps_s[first] = 0.0
    elapsed_s = np.cumsum(gaps_s)
    arrival_s = births_s[conversation] + (elapsed_s - elapsed_s[first][conversation])
    prompt = model.prompt.sample(rng, total)
    answer = model.answer.sample(rng, total)
    return build_trace(conversation, arrival_s, prompt, answer, field=model.field)


def _check_expected_size(model: ConversationModel, conversations: int) -> None:
    """Refuse, stating the limit and the estimate, a trace expected to hold more than :data:`MAX_GENERATED_TURNS`
    turns (time and memory of the draw) or more than ``MAX_TOKENS`` tokens in all (an upper bound of every
    conversation's history, which must stay exact in float64 and far from int64 overflow)."""
    turns = conversations * model.mean_turns
    if turns > MAX_GENERATED_TURNS:
        raise InputError(f"{model.field}.conversations", conversations,
                         f"{conversations:,} conversations of {model.mean_turns:.4g} turns on average are about {turns:.3g} turns, "
                         f"above the limit of {MAX_GENERATED_TURNS:,} generated turns")
    per_turn = model.prompt.expected_tokens + model.answer.expected_tokens
    if turns * per_turn > MAX_TOKENS:
        lengths = max(model.prompt, model.answer, key=lambda m: m.expected_tokens)
        raise InputError(lengths.field, lengths.expected_tokens,
                         f"about {turns:.3g} turns of {per_turn:.3g} tokens on average are {turns * per_turn:.3g} tokens in all, "
                         f"above the limit of {MAX_TOKENS:,} tokens a trace's histories may reach")
