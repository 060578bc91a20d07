"""The analytic model of one prefill/decode-disaggregated pool (xPyD) under the serving policy of roles.py.

A pool serves requests ``r`` with ``(L_in, L_out)`` and probabilities ``w_r`` at ``lambda`` req/s on ``x`` prefill
instances (engine ``t_p``, token budget ``B``), a link of ``beta`` bytes/s per prefill instance (``kv`` bytes per
token) and ``y`` decode instances (decode step ``t_d(b, k) = base + per_seq b + per_kv k``, at most ``b_max``
sequences).  Times are in ms, ``lambda`` below in requests per ms.

**Prefill** (M/G/c, ``c = x``).  A prompt of ``L`` tokens takes ``m = ceil(L / B)`` iterations, chunk ``i`` of ``p_i``
tokens at offset ``o_i = i B``:

    S_p(L) = sum_i t_p(p_i, 0, 0, o_i),   a = lambda E[S_p],   rho_p = a / x <= rho_max.

The wait tail is Kimura's two-moment M/G/c form (optfleet/queueing/kimura.py; Kimura 1994, as in the FleetOpt
paper), ``P(W_p > t) = C(x, a) exp(-theta t)``, ``theta = 2 (x - a) / ((1 + Cs^2) E[S_p])``, with Erlang C in log space
(optfleet/queueing/erlang.py) -- an approximation (exact for exponential service).

**KV transfer.**  ``tau(L) = L kv / beta``; each prefill instance's link sees about ``lambda / x`` transfers
(its prefill completions, taken as Poisson: an approximation), so

    rho_link = (lambda / x) E[tau] <= rho_max          (the link's capacity constraint)
    W_link  = (lambda / x) E[tau^2] / (2 (1 - rho_link))   (Pollaczek-Khinchine M/G/1 mean wait; the mean, not its tail).

**Decode.**  Each decode instance sees Poisson ``lambda_d = lambda / y`` (random split).  With ``kappa = E[L_out L_in +
L_out (L_out - 1)/2] / E[L_out]``, the token-weighted mean context of a decode iteration, and ``sigma = per_seq +
per_kv kappa``, the mean running batch ``b`` solves Little's law ``b = lambda_d E[L_out] t_d(b)``,
``t_d(b) = base + sigma b``:

    b = lambda_d E[L_out] base / (1 - lambda_d E[L_out] sigma),   stable iff  lambda_d E[L_out] sigma < 1.

Admission: the batch has ``b_max`` slots, each held for a request's ``L_out`` steps, so admission is an M/G/c
queue with ``c = b_max`` at offered load ``b``; its wait (Erlang C, Kimura's tail, holding time ``L_out t_d(b)``) is
charged to TTFT, and a plan may let at most :data:`ADMISSION_WAIT_SHARE` of requests wait at all (the simulator finds
this wait's tail far heavier than Kimura's form); ``b / b_max <= rho_max`` too.  The occupancy itself is taken as
M/G/inf (Poisson(b), reported as the P99 batch).  A request of ``n = L_out`` iterations sees on average
``A`` other sequences; for Poisson arrivals of durations ``n_j`` (in iterations, at ``lambda' = lambda_d t_d(b)`` per
iteration), Campbell's theorem over the overlaps gives

    E[A] = b,   Var[A | n] = lambda' E_j[m^2 M - m^3/3] / n^2,   m = min(n, n_j), M = max(n, n_j)

(for equal durations ``2 b / 3``).  Its TPOT is ``base + sigma (1 + A)``, with ``A`` taken as a gamma variable of that
mean and variance (an approximation: the step time is taken at its mean context ``kappa``, and the step's own
variation with the batch is folded into ``sigma``); P99 TPOT is the 0.99-quantile of the mixture over requests with
``L_out >= 2`` by bisection, mean TPOT ``base + sigma (1 + b)``.

**TTFT** (roles.py's definition, first decode step included) by the exact mixture over prompts:

    TTFT_r = W_p + W_a + D_r,   D_r = S_p(L_in,r) + W_link + tau(L_in,r) + t_1(r),   t_1(r) = base + per_seq (1 + b) + per_kv (L_in,r + b kappa)
    P(TTFT > T) = sum_r w_r P(W_p + W_a > T - D_r),   P99 TTFT: the T where this is 0.01 (bisection),

with ``W_a`` the admission wait (independent of ``W_p``: an approximation).

The link wait and the first step enter at their means.  Everything marked *approximation* above is said in
:data:`APPROXIMATIONS`, which every evaluation carries.

**Frontier.**  TPOT, decode stability and admission depend on ``y`` only and fall with it; TTFT falls with ``x``
(Erlang C and the link wait fall) and with ``y`` (the first step shortens); the utilisations fall with their counts.
So the feasible ``(x, y)`` form an up-set, and its Pareto frontier ``{(x_min(y), y)}`` at the counts ``y`` where
``x_min`` drops (``x_min`` non-increasing) is finite: it ends at ``x_min`` of the idle decode limit (``b = 0``).
:meth:`DisaggregatedPool.frontier` finds each next point by a doubling and bisection search over ``y``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from optfleet.engine.reduce import affine_reduction
from optfleet.engine.step import AffineStep, EngineModel
from optfleet.problems.pd_fleet.roles import DecodeRole, PrefillRole, TransferLink, chunked_prefill_ms
from optfleet.queueing.erlang import erlang_c

TAIL = 0.01  # the P99 targets' tail probability
BISECTION_STEPS = 60
ADMISSION_WAIT_SHARE = 1e-3
"""Largest share of requests that may wait for a decode batch slot (Erlang C over ``max_batch`` slots): the wait is
charged to TTFT by Kimura's tail, but the pd_fleet simulator measures a far heavier tail (one-off, shipped RAG pool at
2 decode instances: admission probability 1.7 %, simulated P99 decode wait 8.0 s against 0.5 s by Kimura's form), so
a plan must keep the wait rare."""
MAX_INSTANCES = 1_000_000  # most instances of one role the search counts; beyond, the role is declared unreachable

APPROXIMATIONS = (
    "prefill wait: Kimura's two-moment M/G/c tail",
    "link: completions taken as Poisson, Pollaczek-Khinchine mean wait added to TTFT",
    "decode: M/G/inf occupancy, step at the mean context, TPOT occupancy as a gamma of the Campbell mean and variance",
    "decode admission: Kimura's M/G/c wait over the batch slots, at most 0.1 % of requests waiting",
    "first decode step at the mean batch",
)
"""What the pool model approximates (module docstring), carried by every evaluation."""


@dataclass(frozen=True)
class PoolTargets:
    """The SLO a pool meets: P99 TTFT and P99 TPOT in ms, and the utilisation cap of every server."""

    ttft_p99_ms: float
    tpot_p99_ms: float
    rho_max: float


@dataclass(frozen=True)
class PoolMetrics:
    """One disaggregated pool at ``(x, y)``: latencies (ms), utilisations and what fails.

    ``decode_utilisation`` is the mean running batch over ``max_batch``; ``decode_load`` ``lambda_d E[L_out] sigma``
    (stable below 1); ``violations`` names each broken target in words (empty: feasible).
    """

    prefill_instances: int
    decode_instances: int
    ttft_p99_ms: float
    tpot_p99_ms: float
    tpot_mean_ms: float
    prefill_utilisation: float
    link_utilisation: float
    decode_utilisation: float
    decode_load: float
    decode_batch_mean: float
    decode_batch_p99: float
    prefill_wait_probability: float
    link_wait_ms: float
    violations: tuple[str, ...]

    @property
    def feasible(self) -> bool:
        return not self.violations


@dataclass(frozen=True)
class DecodeState:
    """The decode side at ``y`` instances (module docstring): mean batch, its P99 (Poisson), step load, TPOT, and the
    admission wait's tail ``P(W_a > t) = admission_probability exp(-admission_decay_per_ms t)``."""

    batch_mean: float
    batch_p99: float
    load: float
    step_ms: float
    tpot_p99_ms: float
    tpot_mean_ms: float
    admission_probability: float = 0.0
    admission_decay_per_ms: float = math.inf


class DisaggregatedPool:
    """The analytic model of one pool's traffic on one (prefill, link, decode) configuration; counts vary.

    ``l_in``, ``l_out``, ``weight`` are the pool's request atoms (weights summing to 1), ``rate_rps`` its arrival rate.
    ``decode_step`` is reduced to the affine form over batches up to ``max_batch`` and contexts up to
    ``window_tokens`` unless it is affine already (engine/reduce.py).
    """

    def __init__(self, l_in: NDArray[np.int64], l_out: NDArray[np.int64], weight: NDArray[np.float64], rate_rps: float,
                 prefill_step: EngineModel, token_budget: int, link: TransferLink, decode_step: EngineModel, max_batch: int,
                 window_tokens: int, targets: PoolTargets) -> None:
        keep = np.asarray(weight, dtype=np.float64) > 0
        self.l_in = np.asarray(l_in, dtype=np.float64)[keep]
        self.l_out = np.maximum(np.asarray(l_out, dtype=np.float64)[keep], 1.0)
        w = np.asarray(weight, dtype=np.float64)[keep]
        self.weight = w / w.sum()
        self.rate_per_ms = rate_rps / 1000.0
        self.prefill_step = prefill_step
        self.token_budget = token_budget
        self.link = link
        self.decode = decode_step if isinstance(decode_step, AffineStep) else affine_reduction(decode_step, max_batch, window_tokens, window_tokens)
        self.max_batch = max_batch
        self.targets = targets
        self._decode_states: dict[int | float, DecodeState] = {}

    @classmethod
    def of_roles(cls, l_in: NDArray[np.int64], l_out: NDArray[np.int64], weight: NDArray[np.float64], rate_rps: float,
                 prefill: PrefillRole, link: TransferLink, decode: DecodeRole, window_tokens: int,
                 targets: PoolTargets) -> "DisaggregatedPool":
        """The model of roles.py's three roles (their instance counts are passed to :meth:`metrics`)."""
        return cls(l_in, l_out, weight, rate_rps, prefill.step, prefill.token_budget, link, decode.step, decode.max_batch,
                   window_tokens, targets)

    # ------------------------------------------------------------------ prefill and link

    @cached_property
    def prefill_ms(self) -> NDArray[np.float64]:
        """``S_p(L_in)`` per request: the sum of its chunk iterations (roles.chunked_prefill_ms)."""
        return chunked_prefill_ms(self.prefill_step, self.l_in, self.token_budget)

    @cached_property
    def transfer_ms(self) -> NDArray[np.float64]:
        """``tau(L_in)`` per request."""
        return np.asarray(self.link.transfer_ms(self.l_in), dtype=np.float64)

    @cached_property
    def _prefill_moments(self) -> tuple[float, float]:
        """``(E[S_p], E[S_p^2])``."""
        return float(self.weight @ self.prefill_ms), float(self.weight @ self.prefill_ms**2)

    @cached_property
    def _transfer_moments(self) -> tuple[float, float]:
        """``(E[tau], E[tau^2])``."""
        return float(self.weight @ self.transfer_ms), float(self.weight @ self.transfer_ms**2)

    def prefill_utilisation(self, x: int) -> float:
        return self.rate_per_ms * self._prefill_moments[0] / x

    def link_utilisation(self, x: int) -> float:
        return self.rate_per_ms * self._transfer_moments[0] / x

    def link_wait_ms(self, x: int) -> float:
        """Pollaczek-Khinchine mean wait of one prefill instance's link (inf when saturated)."""
        rho = self.link_utilisation(x)
        if rho >= 1.0:
            return math.inf
        return (self.rate_per_ms / x) * self._transfer_moments[1] / (2.0 * (1.0 - rho))

    def _prefill_tail(self, x: int) -> tuple[float, float]:
        """``(C, theta)`` of ``P(W_p > t) = C exp(-theta t)``; theta 0 when unstable."""
        mean, second = self._prefill_moments
        a = self.rate_per_ms * mean
        if a >= x:
            return 1.0, 0.0
        scv = max(second / mean**2 - 1.0, 0.0)
        return float(erlang_c(x, a)), 2.0 * (x - a) / ((1.0 + scv) * mean)

    # ------------------------------------------------------------------ decode

    @cached_property
    def _decode_constants(self) -> tuple[float, float, float]:
        """``(E[L_out], kappa, sigma)``."""
        mean_out = float(self.weight @ self.l_out)
        kappa = float(self.weight @ (self.l_out * self.l_in + self.l_out * (self.l_out - 1.0) / 2.0)) / mean_out
        return mean_out, kappa, self.decode.per_seq_ms + self.decode.per_kv_token_ms * kappa

    @cached_property
    def _outputs(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The distinct output lengths ``n`` and their probabilities (the TPOT law depends on ``L_out`` only)."""
        n, inverse = np.unique(self.l_out, return_inverse=True)
        return n, np.bincount(inverse.ravel(), weights=self.weight, minlength=len(n))

    @cached_property
    def _overlap_scale(self) -> NDArray[np.float64]:
        """Per distinct ``n``, ``E_j[m^2 M - m^3/3] / (n^2 E[L_out])``: the gamma scale of its occupancy ``A`` (independent
        of y), by prefix sums over the sorted lengths."""
        n, w = self._outputs
        cum = [np.concatenate([[0.0], np.cumsum(w * n**k)]) for k in range(4)]
        below = np.arange(1, len(n) + 1)  # lengths n_j <= n (n sorted, distinct)
        low = cum[2][below] * n - cum[3][below] / 3.0
        high = n**2 * (cum[1][-1] - cum[1][below]) - n**3 / 3.0 * (cum[0][-1] - cum[0][below])
        return (low + high) / (n**2 * self._decode_constants[0])

    def decode_state(self, y: int | float) -> DecodeState:
        """The decode side at ``y`` instances (``y = inf``: the idle limit, ``b = 0``), computed once per ``y``."""
        if y not in self._decode_states:
            self._decode_states[y] = self._decode_state(y)
        return self._decode_states[y]

    def _decode_state(self, y: int | float) -> DecodeState:
        mean_out, _, sigma = self._decode_constants
        lam = self.rate_per_ms / y
        load = lam * mean_out * sigma
        base = self.decode.base_ms
        if load >= 1.0:
            return DecodeState(math.inf, math.inf, load, math.inf, math.inf, math.inf, 1.0, 0.0)
        b = lam * mean_out * base / (1.0 - load)
        step = base + sigma * b
        p99 = float(stats.poisson.ppf(1.0 - TAIL, b)) if b > 0 else 0.0
        tpot_mean = base + sigma * (1.0 + b) if (self.l_out >= 2).any() else 0.0  # no request has a second token
        admission, decay = self._admission_tail(b, step)
        return DecodeState(b, p99, load, step, self._tpot_p99(b, sigma), tpot_mean, admission, decay)

    def _admission_tail(self, b: float, step_ms: float) -> tuple[float, float]:
        """``(C, theta)`` of the admission wait: an M/G/c queue of ``c = max_batch`` batch slots, each held for a
        request's ``L_out`` steps, ``D = L_out t_d(b)``, at offered load ``b`` (Little), by Kimura's tail as for
        prefill; ``(0, inf)`` without load, ``(1, 0)`` when the slots are saturated (``b >= max_batch``)."""
        if b <= 0:
            return 0.0, math.inf
        if b >= self.max_batch:
            return 1.0, 0.0
        n, w = self._outputs
        mean_out = float(w @ n)
        scv = max(float(w @ n**2) / mean_out**2 - 1.0, 0.0)
        return float(erlang_c(self.max_batch, b)), 2.0 * (self.max_batch - b) / ((1.0 + scv) * mean_out * step_ms)

    def _tpot_p99(self, b: float, sigma: float) -> float:
        """The 0.99-quantile of ``base + sigma (1 + A_r)`` over requests with ``L_out >= 2`` (module docstring)."""
        base = self.decode.base_ms
        n, w = self._outputs
        several = n >= 2
        if not several.any():
            return 0.0
        w = w[several] / w[several].sum()
        scale = self._overlap_scale[several]
        if b <= 0:
            return base + sigma
        shape = b / scale

        def tail(occupancy: float) -> float:
            return float(w @ stats.gamma.sf(occupancy, shape, scale=scale))

        lo, hi = 0.0, b + 10.0 * math.sqrt(b * float(scale.max())) + 10.0 * float(scale.max()) + 1.0
        while tail(hi) > TAIL:
            hi *= 2.0
        for _ in range(BISECTION_STEPS):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if tail(mid) > TAIL else (lo, mid)
        return base + sigma * (1.0 + hi)

    # ------------------------------------------------------------------ TTFT and the metrics

    @cached_property
    def _ttft_parts(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The per-request part of ``D_r`` that does not depend on the counts, ``S_p + tau + per_kv L_in``, sorted, and
        the requests' probabilities in that order: ``D_r`` = it + a shift common to all requests."""
        own = self.prefill_ms + self.transfer_ms + self.decode.per_kv_token_ms * self.l_in
        order = np.argsort(own, kind="stable")
        return own[order], self.weight[order]

    def ttft_p99_ms(self, x: int, decode: DecodeState) -> float:
        """The 0.99-quantile of the TTFT mixture (module docstring); inf when a server is saturated.

        ``TTFT_r = W_p + W_a + D_r`` with ``D_r = own_r + shift``, ``shift = W_link + base + per_seq (1 + b) + per_kv b
        kappa``.  Each wait is 0 or exponential (``P(W > t) = C exp(-theta t)``), so ``P(W_p + W_a > s) = sum_k a_k
        exp(-theta_k s)`` (:func:`wait_sum_tail`), and with the ``own_r`` sorted, ``P(TTFT > T) = sum_{D_r > T} w_r +
        sum_k a_k exp(-theta_k T) sum_{D_r <= T} w_r exp(theta_k D_r)`` is prefix sums and one binary search per
        trial ``T`` (each inner sum kept as a running log-sum-exp, so nothing overflows or underflows)."""
        wait_link = self.link_wait_ms(x)
        prob, theta = self._prefill_tail(x)
        if theta <= 0 or decode.admission_decay_per_ms <= 0 or not math.isfinite(wait_link) or not math.isfinite(decode.batch_mean):
            return math.inf
        terms = wait_sum_tail(prob, theta, decode.admission_probability, decode.admission_decay_per_ms)
        _, kappa, _ = self._decode_constants
        b = decode.batch_mean
        shift = wait_link + self.decode.base_ms + self.decode.per_seq_ms * (1.0 + b) + self.decode.per_kv_token_ms * b * kappa
        own, w = self._ttft_parts
        fixed = own + shift
        above = np.concatenate([np.cumsum(w[::-1])[::-1], [0.0]])  # above[i] = sum_{r >= i} w_r
        with np.errstate(divide="ignore"):  # a weight of 0 is log 0 = -inf, which adds nothing
            below = [np.concatenate([[-np.inf], np.logaddexp.accumulate(np.log(w) + rate * fixed)]) for _, rate in terms]

        def tail(t: float) -> float:
            i = int(np.searchsorted(fixed, t, side="right"))  # requests 0..i-1 have D_r <= t
            waited = sum(a * math.exp(logs[i] - rate * t) for (a, rate), logs in zip(terms, below, strict=True))  # exponents <= 0
            return float(above[i] + max(waited, 0.0))

        weight = sum(abs(a) for a, _ in terms)  # 0 when no request waits (the waits' tail is then 0 everywhere)
        reach = max(math.log(weight / TAIL), 0.0) / min(rate for _, rate in terms) if weight > 0 else 0.0
        lo, hi = float(fixed[0]), float(fixed[-1]) + reach + 1e-9
        if tail(lo) <= TAIL:
            return lo
        for _ in range(BISECTION_STEPS):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if tail(mid) > TAIL else (lo, mid)
        return hi

    def decode_violations(self, decode: DecodeState) -> list[str]:
        """The decode-side targets ``decode`` breaks, in words."""
        t = self.targets
        if decode.load >= 1.0:
            return [f"decode unstable (step load {decode.load:.3g} >= 1)"]
        out = []
        if decode.admission_probability > ADMISSION_WAIT_SHARE:
            out.append(f"decode admission: {100 * decode.admission_probability:.3g} % of requests wait for one of "
                       f"{self.max_batch} batch slots (mean batch {decode.batch_mean:.4g}; at most {100 * ADMISSION_WAIT_SHARE:g} %)")
        if decode.batch_mean / self.max_batch > t.rho_max * (1 + 1e-9):
            out.append(f"decode batch occupancy {decode.batch_mean / self.max_batch:.4g} > rho_max {t.rho_max:g}")
        if decode.tpot_p99_ms > t.tpot_p99_ms * (1 + 1e-9):
            out.append(f"P99 TPOT {decode.tpot_p99_ms:.4g} ms > {t.tpot_p99_ms:g} ms")
        return out

    def prefill_violations(self, x: int, decode: DecodeState) -> list[str]:
        """The prefill-side targets (prefill and link utilisation, P99 TTFT) broken at ``x`` prefill instances."""
        t = self.targets
        out = []
        if self.prefill_utilisation(x) > t.rho_max * (1 + 1e-9):
            out.append(f"prefill utilisation {self.prefill_utilisation(x):.4g} > rho_max {t.rho_max:g}")
        if self.link_utilisation(x) > t.rho_max * (1 + 1e-9):
            out.append(f"KV link utilisation {self.link_utilisation(x):.4g} > rho_max {t.rho_max:g} ({self.link.gb_per_s:g} GB/s)")
        if not out:
            ttft = self.ttft_p99_ms(x, decode)
            if not math.isfinite(ttft):
                queue = ("decode" if decode.load >= 1.0 else
                         f"decode admission, mean batch {decode.batch_mean:.4g} >= {self.max_batch} batch slots"
                         if decode.batch_mean >= self.max_batch else "the prefill wait")
                out.append(f"P99 TTFT unbounded > {t.ttft_p99_ms:g} ms (a queue without a steady state: {queue})")
            elif ttft > t.ttft_p99_ms * (1 + 1e-9):
                out.append(f"P99 TTFT {ttft:.4g} ms > {t.ttft_p99_ms:g} ms")
        return out

    def metrics(self, x: int, y: int) -> PoolMetrics:
        """Everything the evaluator reports about the pool at ``x`` prefill and ``y`` decode instances."""
        decode = self.decode_state(y)
        violations = self.decode_violations(decode) + self.prefill_violations(x, decode)
        prob, _ = self._prefill_tail(x)
        return PoolMetrics(
            prefill_instances=x, decode_instances=y, ttft_p99_ms=self.ttft_p99_ms(x, decode), tpot_p99_ms=decode.tpot_p99_ms,
            tpot_mean_ms=decode.tpot_mean_ms, prefill_utilisation=self.prefill_utilisation(x), link_utilisation=self.link_utilisation(x),
            decode_utilisation=decode.batch_mean / self.max_batch, decode_load=decode.load, decode_batch_mean=decode.batch_mean,
            decode_batch_p99=decode.batch_p99, prefill_wait_probability=prob, link_wait_ms=self.link_wait_ms(x),
            violations=tuple(violations),
        )

    # ------------------------------------------------------------------ the frontier

    def min_decode(self) -> int | None:
        """The fewest decode instances meeting the decode-side targets (None: none does, even idle)."""
        if self.decode_violations(self.decode_state(math.inf)):
            return None
        return _smallest(lambda y: not self.decode_violations(self.decode_state(y)), 1)

    def min_prefill(self, decode: DecodeState, upper: int | None = None) -> int | None:
        """The fewest prefill instances meeting TTFT and the prefill and link caps with ``decode`` (None: none)."""
        mean_s, mean_tau = self._prefill_moments[0], self._transfer_moments[0]
        start = max(1, math.ceil(self.rate_per_ms * max(mean_s, mean_tau) / self.targets.rho_max - 1e-9))
        ok = lambda x: not self.prefill_violations(x, decode)  # noqa: E731
        if upper is not None:
            return _smallest(ok, start, upper)
        return _smallest(ok, start)

    def frontier(self) -> tuple[tuple[int, int], ...]:
        """The Pareto frontier ``((x_k, y_k), ...)`` of the feasible counts, ``y`` increasing and ``x`` decreasing
        (empty: no count meets the targets).  Every feasible ``(x, y)`` is at or above some point.

        From ``(x_min(y_min), y_min)``, the next point is at the least ``y' > y`` where ``x - 1`` prefill instances
        suffice (monotone in ``y'``: doubling, then bisection), so each point costs a logarithmic number of evaluations;
        the walk ends at ``x_min`` of the idle decode limit, or when ``x - 1`` is feasible at no count up to
        :data:`MAX_INSTANCES`."""
        y = self.min_decode()
        if y is None:
            return ()
        idle = self.min_prefill(self.decode_state(math.inf))
        x = self.min_prefill(self.decode_state(y))
        if idle is None or x is None:
            return ()
        points = [(x, y)]
        while x > idle:
            fewer = x - 1
            y_next = _smallest(lambda count: not self.prefill_violations(fewer, self.decode_state(count)), y + 1)
            if y_next is None:
                break
            x_next = self.min_prefill(self.decode_state(y_next), upper=fewer)
            assert x_next is not None  # ``fewer`` is feasible there
            x, y = x_next, y_next
            points.append((x, y))
        return tuple(points)


RATE_SEPARATION = 1e-3
"""Two exponential waits whose rates are closer than this (relative) are summed with the smaller rate lowered to this
distance: the hypoexponential form's two terms then cancel to about 1e-13 of their size, not catastrophically, and the
tail is the heavier one (conservative)."""


def wait_sum_tail(c1: float, theta1: float, c2: float, theta2: float) -> list[tuple[float, float]]:
    """``P(W_1 + W_2 > s) = sum_k a_k exp(-theta_k s)`` for ``s >= 0``, as ``[(a_k, theta_k)]``, for independent waits
    that are 0 with probability ``1 - C_i`` and exponential of rate ``theta_i`` otherwise:

        C1 (1 - C2) e^{-theta1 s} + C2 (1 - C1) e^{-theta2 s} + C1 C2 (theta2 e^{-theta1 s} - theta1 e^{-theta2 s}) / (theta2 - theta1)

    (the last term: the sum of two exponentials, hypoexponential); a wait with ``C = 0`` or ``theta = inf`` drops out."""
    if c2 <= 0 or math.isinf(theta2):
        return [(c1, theta1)]
    if abs(theta2 - theta1) < RATE_SEPARATION * max(theta1, theta2):
        if theta1 <= theta2:
            theta1 = theta2 * (1.0 - RATE_SEPARATION)
        else:
            theta2 = theta1 * (1.0 - RATE_SEPARATION)
    both = c1 * c2 / (theta2 - theta1)
    return [(c1 * (1.0 - c2) + both * theta2, theta1), (c2 * (1.0 - c1) - both * theta1, theta2)]


def _smallest(ok, start: int, upper: int | None = None) -> int | None:
    """The least integer ``n >= start`` with ``ok(n)`` for a predicate that is monotone (False then True); ``upper``
    is known to satisfy it.  None when nothing up to :data:`MAX_INSTANCES` does."""
    if ok(start):
        return start
    lo = start
    if upper is None:
        hi = max(2 * start, start + 1)
        while not ok(hi):
            lo = hi
            if hi >= MAX_INSTANCES:
                return None
            hi = min(2 * hi, MAX_INSTANCES)
    else:
        hi = upper
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi
