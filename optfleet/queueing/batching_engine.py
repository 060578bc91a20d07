"""The continuous-batching service model under the engine model (``slo.service_model: batching``, ``preset: engine``).

An engine iteration that carries ``p`` prompt tokens and ``b`` decoding sequences reading ``k`` KV tokens takes
``base + per_seq b + per_kv_token k + per_prefill_token p + per_prefill_pair pairs`` (optfleet/engine/step.py).  Per
request ``i`` (``L_in``, ``L_out >= 1`` decode iterations, ``m_i = ceil(L_in / C)`` prefill chunks) that is

    D_i = per_seq L_out + per_kv_token (L_out L_in + L_out (L_out - 1) / 2)     its decode work (ms),
    P_i = per_prefill_token L_in + per_prefill_pair L_in (L_in + 1) / 2          its prefill compute (ms),

added to the iterations that carry it.  A GPU receives ``lambda`` requests per ms (``lambda_g``, the pool's rate over
its ``n`` GPUs); all below is per GPU, in ms, vectorised over pools and instance counts.

* **Operating point** (mean field).  A decoding request's iteration is ``base + own + M + lambda t E[P]``: its own
  work, ``M`` the others' decode work it meets and the prefill compute per iteration (at ``1 / t`` iterations per
  ms).  Poisson arrivals meet the time average ``lambda t E[D]`` of the others (PASTA); a GPU's held count is
  capped at its ``s`` slots, so a held request meets ``M = lambda t E[D] met``, ``met = (E[K^2] / E[K] - 1) / k``
  (the size-biased held count less itself, ``K`` Poisson cut at ``s`` with mean ``k``: 1 far below the cap,
  ``(s - 1) / s`` at it; :func:`met_share`), so

      t = (base + o) / (1 - lambda E[D] met - lambda E[P]),    o = E[D] / E[L_out]   (own work per decode iteration),

  solved with ``k`` by ``MET_UPDATES`` updates of ``met`` from 1, each at the held slots without the prefill wait
  (``k = lambda E[h - Q]``: the queue's law is solved after the operating point), the operating point at the last;
  an iteration that carries the head prompt's chunk, before its compute, takes ``t_d = base + M``.  ``met`` falls as
  ``k`` rises (:func:`met_share`) and ``k`` rises with ``met``, so the update ``Phi`` is non-increasing and its
  iterates from 1 alternate: every even one is at least the next (``met_1 <= met_0 = 1``, and ``Phi o Phi``
  keeps the order).  With ``MET_UPDATES`` even, the ``met`` of the operating point is at least ``met_share`` of the
  held slots it gives, ``met >= met_share(lambda E[h - Q])``, which the fleet MILP's relaxation uses
  (``optfleet.problems.fleet.batching_pool.cycle_seconds_per_request``).  No operating point (``lambda E[D + P] >= 1``, the GPU's time) is overload.
* **Prefill queue** (the token budget, first come first served): a GI/G/1 queue in ms whose service of request i
  is ``S_i = tau_i t_d + P_i``, ``tau_i = L_in / C`` (a prompt's short last chunk shares its iteration with the
  next prompt's tokens), load ``u = lambda E[S]``.  Its arrivals are a renewal stream, gamma with squared
  coefficient of variation ``c_a^2 = 1 / n + (1 - 1 / n) c_d^2`` over the pool's ``n`` GPUs (:func:`arrival_shape`):
  the simulator's (and a least-loaded router's) dispatcher sends each request to the GPU with the most free slots, so
  a GPU receives a share of the pool's Poisson stream split in turn (``1 / n``) and, beyond it, a stream that follows
  its own departures when arrivals are sparse and takes turns when several come per iteration of a prefilling GPU
  (``c_d^2``, measured on the simulator; that iteration is ``max(t, t_p)``, ``t_p = E[S] / E[ceil(tau)]``); one GPU
  is Poisson, the M/G/1 queue.  The wait's law is Lindley's fixed point on a grid
  (lindley.py).
* **Occupancy.**  Request i holds its slot ``h_i = J + Q + m_i t_d + P_i + L_out t`` (``J`` the join, half an
  iteration on average), so ``k = lambda E[h]`` slots per GPU are held (Little) and the utilisation is ``k / s``.
* **Wait for a slot.**  The birth-death chain of batching.py with the iteration linear in the held sequences per
  GPU, ``t(k) = base + G k``, ``G = E[D + P] / E[h / t]`` (each held sequence's work per held iteration): the
  negative-binomial law below ``c = n s`` slots, geometric above, counted in units of
  ``jump = 1 / (1 - lambda E[P])`` sequences.  A prompt's compute ``P`` stalls every held sequence's progress on its
  GPU, so an admission moves the held count by ``jump`` on average rather than 1, and the count's variance is
  ``jump`` times the chain's:
  ``var / mean = 1 / ((1 - x)(1 - lambda E[P]))``, ``x = lambda E[D + P]`` (the batching simulator's held count:
  2.8 and 5.2 times its mean for Llama-3-70B TP4 at 41 % and 77 % occupancy, against 2.9 and 5.1 here and 1.9 and
  2.7 for the plain chain).  Given a wait, it is exponential with Kimura's two-moment mean
  ``(1 + Cs^2) / (2 (mu_c - lambda))`` (``Cs^2`` of ``h_i`` at the operating point).
* **P99 TTFT**: the 0.99 point of the slot wait plus the in-GPU time to first token
  ``J + Q + m_i t_d' + P_i + first + B_i``, ``first = t_d' + o`` its first decode iteration, ``t_d' = t_d + Z sd``
  the decode step at a normal level of the decode population (Gauss-Hermite points; the prefill is short beside the
  population's relaxation), ``sd`` its instantaneous standard deviation (below), and ``B_i`` the compute of the
  prompt tokens queued behind it that its short last chunk's iteration and its first decode iteration also carry:
  the prompts arriving from its arrival to the end of its prefill (all behind it, first come first served), a
  compound Poisson law with mean count ``lambda (w + J + m_i t_d + P_i)``, ``w`` 0 for a request that did not wait and
  ``E[Q | Q > 0]`` for one that did (the law is taken in those two parts), capped at the ``1 + ceil(tau_i) - tau_i``
  budgets those two iterations hold (:func:`_behind_pmf`).  One law, a mixture over the pool's requests (prompts
  binned to ``C / 8`` tokens), convolved on a grid of ``max(t / 32, S_max / 512)`` ms by FFT.
* **TPOT.**  A request's time per output token over its ``m = L_out - 1`` iterations after the first is
  ``D / m``, ``D`` the window's length.  Without prompts it would be ``m a_i + Y_i``: ``a_i = base + own_i + M``
  (``own_i = per_seq + per_kv_token (L_in + L_out / 2)``) and ``Y_i`` the others' decode work over the window, a
  normal law: the decode population is the negative-binomial chain above, whose variance and relaxation time are
  Poisson's times ``A = 1 / (1 - lambda E[D])`` (its own work slows its departures), averaged over the window
  (:func:`_decode_variance`).  Prompt compute adds to it: ``V``, that of the prompts queued behind the request as its
  decode starts (those that arrived during its wait and its own prefill: mean ``lambda E[P] (E[Q] + E[S])``), and
  that of the prompts arriving in the window, which lengthens the window, during which more prompts arrive -- a busy
  period started by ``W_0 = m a_i + Y_i + V``, whose first three cumulants (:func:`_tpot_ms`, Takacs) give
  ``var D = F^2 N``, ``F = 1 / (1 - lambda' E[P])``: with the dispatcher, only the ``1 / n`` share of a GPU's stream
  that follows time (:func:`arrival_shape`) feeds the window back, ``lambda' = lambda / n``.  ``N`` holds the start's
  variance, the arrivals' ``lambda m t E[P^2]`` and the covariance of each arrival's compute with the decode work it
  adds to the window once prefilled.  The sum is a shifted gamma law with the three cumulants, capped at a full budget
  per iteration; the P99 is that of the mixture over requests with two output tokens or more, by bisection; the mean
  is ``E[a] + lambda t E[P]``.  The law without these three terms (the prompts arriving in a fixed window of ``m t``,
  and the queue's work seen at an arrival) put the P99 TPOT 6-38 % below the simulator where prompts take half of
  an instance's time (docs/guide/engine-model.md, the long-prompts table).

An approximation of the engine (mean-field operating point, a renewal stream for the dispatcher, Kimura's slot
wait, moment-matched TPOT laws), checked against the batching simulator by ``benchmarks/bench_batching_engine.py``
on the shipped instances and on plans away from them (the documentation quotes its table: every case and its error).  The
dispatcher is the weakest part: how far the most-free-slots rule sits between turn-taking (Erlang ``n``) and
random routing (Poisson) is measured on the simulator, not derived (:func:`arrival_shape`).  The fleet MILP's
tables under this model are coarser than the slot model's (milp_batching.py ``ENGINE_RATE_STEPS``): each entry
solves the prefill queue.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special
from scipy.special import gammaincc

from optfleet.engine.step import AffineStep
from optfleet.queueing.batching import JOIN_ITERATIONS, PREFILL_BINS, QUANTILE, BatchingState, slot_wait_probability, take_rows
from optfleet.queueing.lindley import renewal_wait_pmf

GRID_PER_ITERATION = 32  # grid points per mean iteration t, at least
SERVICE_CELLS = 512  # grid points over the longest prefill service, at most
QUEUE_CELLS = 4096  # grid points of a prompt's wait in the token budget's queue
LOST_MASS = 1e-4  # a wait law with more mass beyond its grid than this is not used (the pool is taken as overloaded)
DEPARTURE_SCV = 0.7  # c_d^2 of a GPU's arrivals beyond its turn when arrivals are sparse (arrival_shape)
JOIN_POINTS = 16  # points of the join's uniform law
DECODE_LEVELS = 7  # Gauss-Hermite levels of the decode work under a prompt's prefill
OFFSET_CELLS = 1 << 16  # grid points over the longest in-GPU offset, at most
SLOT_WAIT_TAIL = 1e-7  # the slot wait's law is kept on the grid up to this survival
MAX_SLOT_WAIT_CELLS = 1 << 16
MET_UPDATES = 4  # updates of the decode work a held request meets, from 1 (even: engine_batching_state's operating point)
TPOT_GROUP_RATIO = 1.2  # requests are grouped by L_out - 1 in geometric bins of this ratio for the TPOT mixture
TPOT_BISECTION_STEPS = 60


@dataclass(frozen=True)
class EngineBatchingWorkload:
    """What the model needs of a pool's traffic and engine (arrays over pools; rows of the matrices are pools).

    ``prefill_share[p, b]`` is the share of requests whose prompt rounds up to ``b`` eighths of a chunk and
    ``prefill_bin_ms[p, b]`` their mean prefill compute; ``hold_mean[p]`` is ``E[v]`` and ``hold_second[p]`` ``E[v v^T]``
    of ``v = (m, P, L_out)``; ``tpot_share``, ``tpot_intervals`` and ``tpot_own_ms`` describe the groups of requests
    with two output tokens or more (shares summing to 1 where there are any): ``L_out - 1`` and ``own_i`` (module
    docstring)."""

    rate_rps: NDArray[np.float64]
    base_ms: NDArray[np.float64]
    decode_ms: NDArray[np.float64]  # E[D]
    prefill_ms: NDArray[np.float64]  # E[P]
    prefill_sq_ms2: NDArray[np.float64]  # E[P^2]
    prefill_cube_ms3: NDArray[np.float64]  # E[P^3]
    decode_iterations: NDArray[np.float64]  # E[L_out]
    chunk_compute_mean_ms: NDArray[np.float64]  # E[P] / E[tau]: the mean compute of an iteration spending the whole budget
    hold_mean: NDArray[np.float64]
    hold_second: NDArray[np.float64]
    prefill_share: NDArray[np.float64]
    prefill_bin_ms: NDArray[np.float64]
    tpot_share: NDArray[np.float64]
    tpot_intervals: NDArray[np.float64]
    tpot_own_ms: NDArray[np.float64]
    tpot_own_sq_ms2: NDArray[np.float64]  # per group, E[sigma^2] over its requests' decode iterations
    decode_share: NDArray[np.float64]  # the share of requests with two output tokens or more
    tpot_cross_ms2: NDArray[np.float64]  # per group of window m: E[P sigma min(L_out - 1, U m)] over requests, U uniform

    @property
    def own_ms(self) -> NDArray[np.float64]:
        """``o = E[D] / E[L_out]``: a request's own work per decode iteration, on average."""
        return self.decode_ms / np.maximum(self.decode_iterations, 1.0)


def _cross_marks(prefill_ms: NDArray, sigma_ms: NDArray, decodes: NDArray, weight: NDArray,
                 windows: NDArray) -> NDArray[np.float64]:
    """``E[P sigma E_U[min(L, (1 - U) m)]]`` per window ``m`` (``U`` uniform: where in the window a request arrives;
    ``L`` its decode iterations): ``int_0^1 min(L, v m) dv = L - L^2 / (2 m)`` for ``L < m``, else ``m / 2``."""
    m = np.asarray(windows, dtype=np.float64)[:, None]
    L = np.asarray(decodes, dtype=np.float64)[None, :]
    overlap = np.where(L < m, L - L**2 / (2.0 * m), m / 2.0)
    return overlap @ (weight * prefill_ms * sigma_ms)


@dataclass(frozen=True)
class EngineBatchingState(BatchingState):
    """:class:`BatchingState` plus the TPOT the engine model gives (ms; ``inf`` under overload, 0 without requests
    of two output tokens or more)."""

    tpot_p99_ms: NDArray[np.float64]
    tpot_mean_ms: NDArray[np.float64]
    hold_ms: NDArray[np.float64]
    hold_scv: NDArray[np.float64]


def engine_workload_row(step: AffineStep, chunk_tokens: int, l_in: ArrayLike, l_out: ArrayLike,
                        weight: ArrayLike, prefill_columns: int, tpot_columns: int) -> dict[str, NDArray[np.float64] | float]:
    """One pool's fields of :class:`EngineBatchingWorkload` (all but the rate) from weighted requests."""
    w = np.asarray(weight, dtype=np.float64)
    held = w > 0
    l_in = np.asarray(l_in, dtype=np.float64)[held]
    l_out = np.maximum(np.asarray(l_out, dtype=np.float64)[held], 1.0)
    w = w[held] / w[held].sum()
    decode = step.decode_work_ms(l_in, l_out)
    prefill = np.asarray(step.prefill_compute_ms(l_in), dtype=np.float64)
    chunks = np.ceil(l_in / chunk_tokens)
    v = np.stack([chunks, prefill, l_out])
    bins = np.ceil(l_in * PREFILL_BINS / chunk_tokens).astype(np.int64)
    share = np.bincount(bins, weights=w, minlength=prefill_columns)[:prefill_columns]
    bin_ms = np.divide(np.bincount(bins, weights=w * prefill, minlength=prefill_columns)[:prefill_columns], share,
                       out=np.zeros(prefill_columns), where=share > 0)
    many = l_out >= 2
    group = np.floor(np.log(np.maximum(l_out - 1.0, 1.0)) / np.log(TPOT_GROUP_RATIO)).astype(np.int64)[many]
    gw = w[many]
    mass = np.bincount(group, weights=gw, minlength=tpot_columns)[:tpot_columns]
    intervals = np.divide(np.bincount(group, weights=gw * (l_out[many] - 1.0), minlength=tpot_columns)[:tpot_columns], mass,
                          out=np.ones(tpot_columns), where=mass > 0)
    own = step.seq_step_ms(l_in[many] + l_out[many] / 2.0)
    own_ms = np.divide(np.bincount(group, weights=gw * own, minlength=tpot_columns)[:tpot_columns], mass,
                       out=np.zeros(tpot_columns), where=mass > 0)
    first, growth, steps = step.seq_step_ms(l_in[many]), step.per_kv_token_ms, l_out[many]
    own_sq = first**2 + first * growth * (steps - 1.0) + growth**2 * (steps - 1.0) * (2.0 * steps - 1.0) / 6.0
    own_sq_ms2 = np.divide(np.bincount(group, weights=gw * own_sq, minlength=tpot_columns)[:tpot_columns], mass,
                           out=np.zeros(tpot_columns), where=mass > 0)
    total = mass.sum()
    return {
        "base_ms": step.base_ms, "decode_ms": float(w @ decode), "prefill_ms": float(w @ prefill), "prefill_sq_ms2": float(w @ prefill**2),
        "prefill_cube_ms3": float(w @ prefill**3),
        "decode_iterations": float(w @ l_out),
        "chunk_compute_mean_ms": float(w @ prefill) / max(float(w @ l_in) / chunk_tokens, 1e-300),
        "hold_mean": v @ w, "hold_second": (v * w) @ v.T, "prefill_share": share, "prefill_bin_ms": bin_ms,
        "tpot_share": mass / total if total > 0 else mass, "tpot_intervals": intervals, "tpot_own_ms": own_ms,
        "tpot_own_sq_ms2": own_sq_ms2, "decode_share": float(total),
        "tpot_cross_ms2": _cross_marks(prefill, step.seq_step_ms(l_in + l_out / 2.0), l_out - 1.0, w, intervals),
    }


def tpot_columns(max_output_tokens: int) -> int:
    """Width of the TPOT group rows for outputs of at most ``max_output_tokens`` tokens."""
    return int(np.floor(np.log(max(max_output_tokens - 1, 1)) / np.log(TPOT_GROUP_RATIO))) + 1


@np.errstate(divide="ignore", invalid="ignore", over="ignore")  # overloaded pools take inf and are masked
def engine_batching_state(load: EngineBatchingWorkload, gpus: ArrayLike, slots_per_instance: ArrayLike,
                          ttft_limit_ms: float = np.inf) -> EngineBatchingState:
    """Evaluate the model (module docstring) for ``gpus`` GPUs per pool (``gpus >= 1``).  A pool whose P99 TTFT is
    found above ``ttft_limit_ms`` before its prefill queue is solved (a search asking whether it meets an SLO) gets
    an infinite TTFT."""
    n = np.maximum(np.asarray(gpus, dtype=np.float64), 1.0)
    rate, base, dec, pre, own = np.broadcast_arrays(load.rate_rps, load.base_ms, load.decode_ms, load.prefill_ms, load.own_ms)
    n, s = np.broadcast_arrays(n, np.asarray(slots_per_instance, dtype=np.float64))
    lam = rate / n / 1000.0  # per GPU, per ms
    work = lam * (dec + pre)
    tau = np.arange(load.prefill_share.shape[-1]) / PREFILL_BINS
    met = np.ones_like(lam)  # the decode work a held request meets, over the time average (module docstring)
    for _ in range(MET_UPDATES):
        t, t_d = _operating_point(lam, base, own, dec, pre, met, work)
        met = met_share(lam * (JOIN_ITERATIONS * t + np.sum(load.hold_mean * _hold_weights(t, t_d), axis=-1)), s)
    t, t_d = _operating_point(lam, base, own, dec, pre, met, work)
    service = tau * t_d[:, None] + load.prefill_bin_ms  # S per prefill bin
    e_s = np.sum(load.prefill_share * service, axis=-1)
    u = lam * e_s
    first_ms = t_d + own  # the first decode iteration without the prompts behind (a draw in _ttft_quantiles_ms)
    queue = PrefillQueue.solve(load.prefill_share, service, lam, n, t, (work < 1.0) & (u < 1.0), ttft_limit_ms - first_ms)
    q = queue.mean_ms
    c = _hold_weights(t, t_d)
    body = np.sum(load.hold_mean * c, axis=-1)
    hold = JOIN_ITERATIONS * t + q + body
    scv = np.maximum(np.einsum("pi,pij,pj->p", c, load.hold_second, c) / body**2 - 1.0, 0.0)
    held = lam * hold
    hold_iterations = hold / t
    per_held = (dec + pre) / hold_iterations  # G: work per held sequence per held iteration
    full = base + per_held * s
    stable = (work < 1.0) & (u < 1.0) & queue.solved & np.isfinite(hold) & (held <= s) & (rate / 1000.0 * hold_iterations * full < n * s)
    jump = 1.0 / np.maximum(1.0 - lam * pre, 1e-300)  # the held count's noise per admission (module docstring)
    p_wait = slot_wait_probability(rate, hold_iterations, n, s, base / 1000.0, per_held / 1000.0, stable, jump)
    drain = n * s / (full / 1000.0 * hold_iterations) - rate
    slot_wait_mean_ms = np.where(stable, 1000.0 * (1.0 + scv) / (2.0 * drain), 0.0)  # given a wait
    in_gpu, ttft = _ttft_quantiles_ms(load, lam, t, t_d, first_ms, queue, np.where(stable, p_wait, 0.0),
                                      slot_wait_mean_ms, stable)
    # the prompts arriving during a request's wait and prefill (its sojourn) are queued behind it as its decode starts
    sojourn_ms = q + e_s
    sojourn_var = queue.variance_ms2 + np.sum(load.prefill_share * service**2, axis=-1) - e_s**2
    backlog = (lam * pre * sojourn_ms, lam * load.prefill_sq_ms2 * sojourn_ms + (lam * pre) ** 2 * sojourn_var)
    tpot_p99, tpot_mean = _tpot_ms(load, lam, n, t, t_d - base, backlog, stable)
    inf = np.inf
    return EngineBatchingState(
        stable=stable,
        iteration_ms=np.where(stable, t, full),
        utilisation=np.where(stable, held, s) / s,
        prefill_load=np.where(stable, u, np.minimum(np.nan_to_num(u, nan=1.0), 1.0)),
        prefill_wait_iterations=np.where(stable, q / t, inf),
        wait_probability=np.where(stable, p_wait, 1.0),
        wait_p99_ms=np.where(stable & ~queue.given_up, np.nan_to_num(ttft - in_gpu, nan=inf), inf),
        in_gpu_p99_ms=np.where(stable & ~queue.given_up, in_gpu, inf),
        tpot_p99_ms=np.where(stable, tpot_p99, inf),
        tpot_mean_ms=np.where(stable, tpot_mean, inf),
        hold_ms=np.where(stable, hold, inf),
        hold_scv=np.where(stable, scv, 0.0),
    )


def _operating_point(lam: NDArray, base: NDArray, own: NDArray, dec: NDArray, pre: NDArray, met: NDArray,
                     work: NDArray) -> tuple[NDArray, NDArray]:
    """The iteration ``t = (base + o) / (1 - lambda E[D] met - lambda E[P])`` and the head prompt's iteration before its
    compute, ``t_d = base + lambda E[D] met t`` (module docstring); ``t`` infinite where ``lambda E[D + P] >= 1``."""
    others = lam * dec * met
    t = np.where(work < 1.0, (base + own) / np.maximum(1.0 - others - lam * pre, 1e-300), np.inf)
    return t, base + others * t


def _hold_weights(t: NDArray, t_d: NDArray) -> NDArray[np.float64]:
    """``c`` with a request's hold ``h = J + Q + c . v``, ``v = (m, P, L_out)``: ``(t_d, 1, t)`` per pool."""
    return np.stack([t_d, np.ones_like(t), t], axis=-1)


@dataclass(frozen=True)
class PrefillQueue:
    """The token budget's queue per pool: the law of a prompt's wait (``pmf[row, k]`` at ``k cell_ms[row]`` ms) and
    its mean and variance; ``solved`` is False where the queue is unstable or its wait outgrew the grid."""

    pmf: NDArray[np.float64]
    cell_ms: NDArray[np.float64]
    mean_ms: NDArray[np.float64]
    variance_ms2: NDArray[np.float64]
    solved: NDArray[np.bool_]
    given_up: NDArray[np.bool_]  # the wait's 0.99 point reached the caller's limit: the law is a lower bound

    @classmethod
    def solve(cls, share: NDArray, service_ms: NDArray, lam: NDArray, gpus: NDArray, t: NDArray, stable: NDArray,
              give_up_ms: NDArray) -> PrefillQueue:
        """The GI/G/1 queue of each GPU's prompts (lindley.py): services ``service_ms`` (per prefill bin, shares
        ``share``), arrivals at ``lam`` per ms, a gamma renewal stream of shape :func:`arrival_shape` (the dispatcher
        sends each request to the GPU with the most free slots; its turns span a prefilling iteration), on a grid
        of ``max(t / GRID_PER_ITERATION, S_max / SERVICE_CELLS)`` ms per row."""
        rows = len(t)
        live = np.flatnonzero(stable & np.isfinite(t))
        longest = np.max(np.where((share > 0) & np.isfinite(service_ms), service_ms, 0.0), axis=-1)
        cell = np.maximum(np.where(np.isfinite(t), t, 1.0) / GRID_PER_ITERATION, longest / SERVICE_CELLS)
        pmf = np.zeros((rows, QUEUE_CELLS))
        pmf[:, 0] = 1.0
        solved = np.zeros(rows, dtype=bool)
        given_up = np.zeros(rows, dtype=bool)
        if len(live):
            window = np.maximum(t, prefill_iteration_ms(share, service_ms))  # the turn-taking's iteration (arrival_shape)
            law, lost, stopped = renewal_wait_pmf(share[live], service_ms[live], lam[live], arrival_shape(gpus[live], (lam * gpus * window)[live]), cell[live],
                                                  QUEUE_CELLS, np.broadcast_to(give_up_ms, (rows,))[live])
            pmf[live] = law
            solved[live] = lost <= LOST_MASS
            given_up[live] = stopped
        points = np.arange(QUEUE_CELLS) * cell[:, None]
        mean = np.sum(pmf * points, axis=-1)
        variance = np.maximum(np.sum(pmf * points**2, axis=-1) - mean**2, 0.0)
        return cls(pmf, cell, np.where(solved, mean, np.inf), np.where(solved, variance, np.inf), solved, given_up)


def prefill_iteration_ms(share: NDArray, service_ms: NDArray) -> NDArray[np.float64]:
    """The mean length of a GPU's iterations while it prefills, ``t_p = E[S] / E[ceil(tau)]``: a prompt's service
    ``S`` spread over the ``ceil(tau)`` iterations its chunks span (at least one), per pool (prefill bins ``share``,
    services ``service_ms`` per bin); 0 for a pool without prompts."""
    chunks = np.maximum(np.ceil(np.arange(share.shape[-1]) / PREFILL_BINS), 1.0)
    served = np.sum(share * np.where(np.isfinite(service_ms), service_ms, 0.0), axis=-1)
    spans = np.sum(share * chunks, axis=-1)
    return np.divide(served, spans, out=np.zeros_like(served), where=spans > 0)


def arrival_shape(gpus: NDArray, pool_arrivals_per_iteration: NDArray) -> NDArray[np.float64]:
    """The gamma shape ``1 / c_a^2`` of a GPU's interarrival times in a pool of ``n`` GPUs under the most-free-slots
    dispatcher, ``a`` the pool's arrivals per iteration of a prefilling GPU (``lambda n max(t, t_p)``,
    :func:`prefill_iteration_ms`):

        c_a^2 = 1 / n + (1 - 1 / n) c_d^2,    c_d^2 = DEPARTURE_SCV / (1 + a).

    A fitted blend, not a derivation.  Its two ends are turn-taking (Erlang ``n``, ``c_a^2 = 1 / n``) and a stream
    nearly as variable as Poisson; the reasons for the shape: slots free only at iteration ends, so when arrivals are
    sparse (``a`` well below 1) each one goes where the last iteration freed a slot and a GPU's arrivals follow its
    own departures, while when several arrive within an iteration the dispatcher takes the GPUs in turn.  The
    iteration that matters to the prefill queue is one that carries a prompt, ``t_p`` long (longer than ``t`` when
    prompts are): while a GPU prefills, its decode departures nearly stop and the dispatcher, which sees its held
    count unchanged, sends that iteration's arrivals to the others in turn (on the batching simulator, pd_fleet's
    shipped aggregated pools: a GPU's departures while it prefills run at 0.05-0.34 of their rate between prompts,
    its arrivals at 0.70-0.90 of its mean rate).  With ``t`` in place of ``max(t, t_p)`` the model put the P99 TTFT
    10-19 % above the simulator on seven of the long-prompt rows of benchmarks/bench_batching_engine.py.
    ``DEPARTURE_SCV`` (0.7, a little below Poisson's 1: the dispatcher's balancing) and the ``1 + a`` were fitted,
    with ``a = lambda n t``, to the batching simulator's in-GPU P99 on Llama-3-70B TP4 with 3,000-token prompts and
    on the shipped Azure 70B and LMSYS 8B short pools; with the prefilling iteration, 0.7 still scores best of 0.7,
    0.8, 0.9 and 1 against both of that benchmark's families.  One GPU is Poisson (the M/G/1 queue)."""
    n = np.maximum(np.asarray(gpus, dtype=np.float64), 1.0)
    return 1.0 / (1.0 / n + (1.0 - 1.0 / n) * DEPARTURE_SCV / (1.0 + np.nan_to_num(pool_arrivals_per_iteration, posinf=1e300)))


def met_share(held: NDArray, slots: NDArray) -> NDArray[np.float64]:
    """The others a held request meets on its GPU, over the time-average held count ``k``: ``(E[K^2] / E[K] - 1) / k``
    (the size-biased count less itself) with ``K`` Poisson cut at the ``s`` slots and of mean ``k`` -- 1 where the cut
    does not matter (Poisson: PASTA), ``(s - 1) / s`` for a full GPU.

    **It falls as k rises.**  Let ``K`` have parameter ``a`` (``P[K = i] ~ a^i / i!``, ``i <= s``), ``N`` be Poisson of
    mean ``a``, ``H_j = P[N <= j]`` and ``p_j = P[N = j]``.  Then ``E[K(K - 1)] = a^2 H_{s-2} / H_s`` and
    ``E[K] = a H_{s-1} / H_s``, so the share is ``H_{s-2} H_s / H_{s-1}^2`` and, with ``dH_j / da = -p_j``,

        d log(share) / d log a = -a (r_{s-2} + r_s - 2 r_{s-1}),    r_j = p_j / H_j.

    Substituting ``t = a + u`` in ``H_j = int_a^inf t^j e^-t dt / j!`` gives ``1 / r_j = M(j) = E[(1 + U / a)^j]``,
    ``U`` exponential of mean 1; ``1 / M`` is convex in ``j`` when ``2 M'^2 >= M M''``, that is when ``L = log(1 + U / a)``
    has a variance at most its squared mean under the tilted law ``e^(jL) / M(j)``.  That law's density is proportional
    to ``e^((j + 1) l - a e^l)`` on ``l >= 0``, log-concave, and a log-concave law on ``[0, inf)`` has a coefficient of
    variation at most 1 (it has an increasing failure rate, hence is new-better-than-used-in-expectation: Barlow and
    Proschan, *Statistical Theory of Reliability and Life Testing*, 1975).  So ``r`` is convex in ``j``, the share falls
    as ``a`` rises, and ``k`` rises with ``a`` (``dk / d log a = var K > 0``).  The bisection below puts ``log a`` within
    1e-16 and the two short cuts return the share's bounds (1, and ``(s - 1) / s`` at ``k >= s``), so the function stays
    non-increasing in ``k`` to rounding (``tests/test_batching_engine.py``)."""
    k = np.asarray(held, dtype=np.float64)
    s = np.asarray(slots, dtype=np.float64)
    out = np.ones_like(k)
    with np.errstate(invalid="ignore"):
        cut = np.isfinite(k) & (k > 0) & (k + 8.0 * np.sqrt(k) + 1.0 > s)
    out[cut & (k >= s)] = (s[cut & (k >= s)] - 1.0) / s[cut & (k >= s)]
    rows = np.flatnonzero(cut & (k < s))
    if not len(rows):
        return out
    counts = np.arange(int(s[rows].max()) + 1, dtype=np.float64)
    inside = counts[None, :] <= s[rows, None]
    log_factorial = np.concatenate(([0.0], np.cumsum(np.log(counts[1:]))))
    lo, hi = np.log(k[rows]) - 1.0, np.log(np.maximum(k[rows], 1.0)) + 60.0

    def moments(log_a: NDArray) -> tuple[NDArray, NDArray]:
        log_p = np.where(inside, counts * log_a[:, None] - log_factorial, -np.inf)
        p = np.exp(log_p - log_p.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        return p @ counts, p @ counts**2

    for _ in range(60):  # the mean rises with a
        mid = 0.5 * (lo + hi)
        low = moments(mid)[0] < k[rows]
        lo, hi = np.where(low, mid, lo), np.where(low, hi, mid)
    first, second = moments(0.5 * (lo + hi))
    out[rows] = (second / first - 1.0) / k[rows]
    return out


def _ttft_quantiles_ms(load: EngineBatchingWorkload, lam: NDArray, t: NDArray, t_d: NDArray, first_ms: NDArray, queue: PrefillQueue,
                       p_wait: NDArray, slot_wait_mean_ms: NDArray, stable: NDArray) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(y, TTFT)`` (ms) per pool: the 0.99 points of the in-GPU time ``J + Q + m_i t_d' + P_i + first + B_i`` and of it
    plus the slot wait (0 with probability ``1 - p_wait``, else exponential with mean ``slot_wait_mean_ms``: Kimura's
    tail), on the queue's grid (module docstring); ``inf`` where not stable."""
    rows = len(t)
    in_gpu, ttft = np.full(rows, np.inf), np.full(rows, np.inf)
    live = np.flatnonzero(np.asarray(stable) & np.isfinite(t))
    if not len(live):
        return in_gpu, ttft
    cell = queue.cell_ms[live]
    share = load.prefill_share[live]
    bins = np.arange(share.shape[-1])
    chunks = np.ceil(bins / PREFILL_BINS)
    # the decode work of the iterations a prompt's chunks and first token take is one draw of its law (the prefill is
    # short beside the decode population's relaxation): a mixture over Gauss-Hermite levels z, t_d + z sd
    lam_live = (lam / np.ones_like(t))[live]
    level_ms = np.sqrt(_decode_variance(take_rows(load, live), lam_live, t[live], None))
    nodes, weights = np.polynomial.hermite_e.hermegauss(DECODE_LEVELS)
    weights = weights / weights.sum()
    shift = nodes[None, :, None] * level_ms[:, None, None]  # [row, level, -]
    step_ms = np.maximum(t_d[live, None, None] + shift, load.base_ms[live, None, None])
    offset_ms = chunks * step_ms + load.prefill_bin_ms[live, None, :] + first_ms[live, None, None] + step_ms - t_d[live, None, None]
    # the prompts arriving during its wait and prefill (FCFS: all of them behind it) fill the rest of its last chunk's
    # budget, then its first decode iteration's: (1 + ceil(tau) - tau) budgets at most, in eighths (:func:`_behind_pmf`);
    # their count follows its wait, taken in two parts: no wait, and a wait of the mean of the positive ones
    prefill_ms = JOIN_ITERATIONS * t[live, None] + chunks * t_d[live, None] + load.prefill_bin_ms[live]  # its join and iterations
    no_wait = queue.pmf[live, 0]
    waited_ms = np.where(no_wait < 1.0, queue.mean_ms[live] / np.maximum(1.0 - no_wait, 1e-300), 0.0)
    behind = [_behind_pmf(share, lam_live[:, None] * (w[:, None] + prefill_ms)) for w in (np.zeros_like(waited_ms), waited_ms)]
    eighth_ms = load.chunk_compute_mean_ms[live] / PREFILL_BINS  # the compute of an eighth of a budget
    offset_ms = offset_ms[..., None] + (eighth_ms[:, None] * np.arange(behind[0].shape[-1]))[:, None, None, :]  # [row, level, bin, eighths]
    longest = np.max(np.where(np.broadcast_to(share[:, None, :, None] > 0, offset_ms.shape), offset_ms, 0.0), axis=(1, 2, 3))
    # a grid coarse enough that the longest offset fits OFFSET_CELLS points (the queue's law summed onto it)
    coarse = np.maximum(cell, longest / OFFSET_CELLS)
    wait = _coarsened(queue.pmf[live], cell, coarse)
    cell = coarse
    position = np.rint(offset_ms / cell[:, None, None, None]).astype(np.int64)
    masses = [weights[None, :, None, None] * (share[:, :, None] * b)[:, None, :, :] for b in behind]
    width = int(position[(masses[0] > 0) | (masses[1] > 0)].max(initial=0)) + 1
    firsts = []
    for mass in masses:
        first = np.zeros((len(live), width))
        np.add.at(first, (np.repeat(np.arange(len(live)), mass[0].size), np.minimum(position, width - 1).reshape(len(live), -1).ravel()),
                  mass.reshape(len(live), -1).ravel())
        firsts.append(first)
    join_cells = np.rint((np.arange(JOIN_POINTS) + 0.5) / JOIN_POINTS * t[live, None] / cell[:, None]).astype(np.int64)
    join = np.zeros((len(live), int(join_cells.max()) + 1))
    np.add.at(join, (np.repeat(np.arange(len(live)), JOIN_POINTS), join_cells.ravel()), 1.0 / JOIN_POINTS)
    slot = _slot_wait_pmf(p_wait[live], slot_wait_mean_ms[live], cell)
    size = int(2 ** np.ceil(np.log2(width + join.shape[-1] + wait.shape[-1] + slot.shape[-1])))
    waited = wait.copy()
    waited[:, 0] = 0.0
    prefill_hat = np.fft.rfft(firsts[0], size) * wait[:, :1] + np.fft.rfft(firsts[1], size) * np.fft.rfft(waited, size)
    gpu_hat = prefill_hat * np.fft.rfft(join, size)
    for target, transform in ((in_gpu, gpu_hat), (ttft, gpu_hat * np.fft.rfft(slot, size))):
        index = np.argmax(np.cumsum(np.fft.irfft(transform, size), axis=-1) >= QUANTILE, axis=-1)
        target[live] = index * cell
    return in_gpu, ttft


def _behind_pmf(share: NDArray, arrivals: NDArray) -> NDArray[np.float64]:
    """``[row, bin, k]``: the law of the prompt tokens (in eighths of a budget) that a prompt of ``bin`` eighths finds
    queued behind it as its prefill ends, capped at what its last chunk's iteration and its first decode iteration can
    carry, ``PREFILL_BINS + ceil(tau) - tau`` eighths.  ``arrivals[row, bin]`` prompts arrive meanwhile on average,
    each of ``b`` eighths with probability ``share[row, b]``: a compound Poisson law, by Panjer's recursion
    ``g_0 = exp(-m (1 - q_0))``, ``g_k = (m / k) sum_i i q_i g_{k - i}``.  Poisson although the prefill queue's
    stream is more regular: over one prefill (a fraction of a second) a GPU's arrival count in the batching
    simulator has a variance 0.87-0.92 of its mean, against 0.4-0.6 over 5 s."""
    top = 2 * PREFILL_BINS  # the largest cap is 2 budgets less an eighth
    m = np.maximum(np.nan_to_num(arrivals, nan=0.0, posinf=0.0), 0.0)  # [row, bin]
    q = np.zeros((len(share), top))
    q[:, : min(top, share.shape[-1])] = share[:, :top]
    g = np.zeros(m.shape + (top,))
    g[..., 0] = np.exp(-m * (1.0 - q[:, 0:1]))
    for k in range(1, top):
        i = np.arange(1, k + 1)
        g[..., k] = m / k * np.einsum("ri,rbi->rb", i * q[:, i], g[..., k - i])
    cap = PREFILL_BINS + (-np.arange(share.shape[-1])) % PREFILL_BINS  # [bin]
    kept = np.arange(top)[None, :] < cap[:, None]
    law = np.where(kept[None], g, 0.0)
    np.put_along_axis(law, np.broadcast_to(cap[None, :, None], m.shape + (1,)), (1.0 - law.sum(axis=-1, keepdims=True)).clip(min=0.0), axis=-1)
    return law


def _slot_wait_pmf(p_wait: NDArray, mean_ms: NDArray, cell_ms: NDArray) -> NDArray[np.float64]:
    """The slot wait's law on grids of ``cell_ms`` per row: 0 with probability ``1 - p_wait``, else exponential with mean
    ``mean_ms`` (cell ``k`` holds ``P[k - 1 < W / cell <= k]``), kept up to survival ``SLOT_WAIT_TAIL`` (at most
    ``MAX_SLOT_WAIT_CELLS`` points, the rest on the last)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        reach = np.where(p_wait > SLOT_WAIT_TAIL, mean_ms * np.log(p_wait / SLOT_WAIT_TAIL) / cell_ms, 0.0)
    cells = int(min(np.ceil(reach.max(initial=0.0)), MAX_SLOT_WAIT_CELLS)) + 2
    edges = np.arange(cells) * cell_ms[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        survival = np.where(mean_ms[:, None] > 0, p_wait[:, None] * np.exp(-edges / np.where(mean_ms > 0, mean_ms, 1.0)[:, None]), 0.0)
    pmf = -np.diff(np.concatenate([np.ones((len(p_wait), 1)), survival], axis=-1), axis=-1)
    pmf[:, -1] += survival[:, -1]
    return pmf


def _coarsened(pmf: NDArray, cell_ms: NDArray, coarse_ms: NDArray) -> NDArray[np.float64]:
    """Laws on grids of ``cell_ms`` per row summed onto grids of ``coarse_ms >= cell_ms`` (point k to the nearest)."""
    if np.all(coarse_ms <= cell_ms):
        return pmf
    target = np.rint(np.arange(pmf.shape[-1])[None, :] * (cell_ms / coarse_ms)[:, None]).astype(np.int64)
    out = np.zeros_like(pmf)
    np.add.at(out, (np.repeat(np.arange(len(pmf)), pmf.shape[-1]), target.ravel()), pmf.ravel())
    return out


def busy_period_cumulants(start: tuple[ArrayLike, ArrayLike, ArrayLike], rate_per_ms: ArrayLike,
                          work_moments: tuple[ArrayLike, ArrayLike, ArrayLike]) -> tuple[NDArray, NDArray, NDArray]:
    """The first three cumulants of a busy period of a unit-speed server started by work ``W_0`` (cumulants
    ``start``), Poisson arrivals at ``rate_per_ms`` each bringing work ``P`` (raw moments ``work_moments``:
    ``E[P], E[P^2], E[P^3]``).

    Given ``W_0 = w`` the busy period's cumulant generating function is ``w psi(theta)``, ``psi`` the exponent per unit
    of initial work, ``psi(theta) = theta + lambda (E[exp(psi(theta) P)] - 1)`` (Takacs), whose derivatives at 0 are
    ``psi' = F = 1 / (1 - lambda E[P])``, ``psi'' = lambda E[P^2] F^3`` and
    ``psi''' = lambda E[P^3] F^4 + 3 (lambda E[P^2])^2 F^5``; so ``K_D = K_W0(psi)`` and by Faa di Bruno
    ``k1 = F E[W_0]``, ``k2 = F^2 var W_0 + psi'' E[W_0]``, ``k3 = F^3 k3(W_0) + 3 F psi'' var W_0 + psi''' E[W_0]``
    (infinite where ``lambda E[P] >= 1``)."""
    mean, var, third = (np.asarray(c, dtype=np.float64) for c in start)
    lam = np.asarray(rate_per_ms, dtype=np.float64)
    p1, p2, p3 = (np.asarray(p, dtype=np.float64) for p in work_moments)
    load = lam * p1
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(load < 1.0, 1.0 / (1.0 - load), np.inf)
        second = lam * p2 * f**3
        psi3 = lam * p3 * f**4 + 3.0 * (lam * p2) ** 2 * f**5
        return f * mean, f**2 * var + second * mean, f**3 * third + 3.0 * f * second * var + psi3 * mean


def _tpot_ms(load: EngineBatchingWorkload, lam: NDArray, gpus: NDArray, t: NDArray, others_ms: NDArray,
             backlog: tuple[NDArray, NDArray], stable: NDArray) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(P99, mean)`` TPOT per pool (module docstring); 0 for a pool with no request of two output tokens or more.

    The window's length ``D`` is a busy period (:func:`busy_period_cumulants`) in which the prompts arriving at
    ``lambda' = lambda / n`` per ms (the share of a GPU's stream that follows time, :func:`arrival_shape`) add their
    compute ``P``, started by ``W_0``: the decode work ``m a + Y``, the queued prompts' compute ``V`` (a gamma law)
    and that of the ``lambda (1 - 1 / n) m t`` prompts of the stream that follows iterations (a window of ``m``
    iterations holds them whatever its length), each adding with its compute the decode work it does once prefilled
    (``sigma`` ms per iteration over ``o`` of the window's iterations): the covariance ``2 lambda m t E[P sigma o]``
    (``tpot_cross_ms2``).  ``E[W_0] = m t (1 - lambda' E[P])``, so ``E[D] = m t``; TPOT is ``D / m``.
    """
    share, m = load.tpot_share, load.tpot_intervals
    chunk = load.chunk_compute_mean_ms[:, None]
    backlog_mean, backlog_var = (b[:, None] for b in backlog)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        a = load.base_ms[:, None] + load.tpot_own_ms + others_ms[:, None]
        arrivals = lam[:, None] * m * t[:, None]  # n_w, the prompts arriving in the window
        k1 = (backlog_mean + arrivals * load.prefill_ms[:, None]) / m
        decode_var = _decode_variance(load, lam, t, m * t[:, None])
        timed = (lam / np.maximum(np.asarray(gpus, dtype=np.float64), 1.0))[:, None]  # lambda'
        fixed = arrivals - timed * m * t[:, None]  # the window's prompts from the stream that follows iterations
        backlog_k3 = np.where(backlog_mean > 0, 2.0 * backlog_var**2 / np.where(backlog_mean > 0, backlog_mean, 1.0), 0.0)
        start_var = backlog_var + decode_var * m**2 + fixed * load.prefill_sq_ms2[:, None] + 2.0 * arrivals * load.tpot_cross_ms2
        start = (m * t[:, None] * (1.0 - timed * load.prefill_ms[:, None]), start_var, backlog_k3 + fixed * load.prefill_cube_ms3[:, None])
        moments = (load.prefill_ms[:, None], load.prefill_sq_ms2[:, None], load.prefill_cube_ms3[:, None])
        _, var_d, k3_d = busy_period_cumulants(start, timed, moments)
        k2, k3 = var_d / m**2, k3_d / m**3
        spread = 4.0 * np.sqrt(decode_var)
    some = share.sum(axis=-1) > 0
    mean = np.where(some, np.sum(share * a, axis=-1) + lam * t * load.prefill_ms, 0.0)
    live = np.asarray(stable) & some & np.isfinite(t)
    # a shifted gamma law with those cumulants (a normal law where the third is 0)
    skewed = k3 > 0
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        shape = np.where(skewed, 4.0 * k2**3 / np.where(skewed, k3, 1.0) ** 2, 1.0)
        scale = np.where(skewed, k3 / (2.0 * k2), 1.0)
        start = a + k1 - shape * scale
        sd = np.sqrt(k2)
    top = a + chunk + spread  # no iteration carries more than a full budget
    lo = np.where(live, np.min(np.where(share > 0, a - spread, np.inf), axis=-1), 0.0)
    hi = np.where(live, np.max(np.where(share > 0, top, -np.inf), axis=-1), 0.0)

    def tail(x: NDArray) -> NDArray:
        """``P[TPOT > x]`` of the mixture per pool."""
        x_ = x[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            sf = np.where(skewed, gammaincc(shape, np.maximum(x_ - start, 0.0) / scale),
                          np.where(sd > 0, special.ndtr((a + k1 - x_) / np.where(sd > 0, sd, 1.0)), (x_ < a + k1).astype(float)))
        return np.sum(share * np.where(x[:, None] >= top, 0.0, np.nan_to_num(sf)), axis=-1)

    for _ in range(TPOT_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        over = tail(mid) > 1.0 - QUANTILE
        lo, hi = np.where(over, mid, lo), np.where(over, hi, mid)
    return np.where(live, hi, 0.0), mean


def _decode_variance(load: EngineBatchingWorkload, lam: NDArray, t: NDArray, window_ms: NDArray | None) -> NDArray[np.float64]:
    """Variance (ms^2) of the other requests' decode work per iteration, averaged over each group's window ``w`` (or
    at an instant, ``window_ms`` None: one value per pool).

    The decoding requests are a birth-death population: each decodes for ``S = L_out t`` ms, adding ``sigma`` per
    iteration (``E[sigma^2]`` per group), and its own work stretches every iteration, so the departures slow as it
    grows -- the negative-binomial chain of the slot wait, whose variance and relaxation time are Poisson's times
    ``A = 1 / (1 - lambda E[D])``.  Its autocovariance at lag ``h`` is taken as ``A lambda E[sigma^2 (A S - h)^+]``, so the
    average over ``w`` has variance ``(2 / w^2) A lambda sum_h E[sigma^2] I(w, A S_h)``, ``I(w, S) = w S b - (w + S)
    b^2 / 2 + b^3 / 3``, ``b = min(w, S)`` (``A lambda E[sigma^2 A S]`` as ``w -> 0``)."""
    with np.errstate(divide="ignore"):
        stretch = 1.0 / np.maximum(1.0 - lam * load.decode_ms, 1e-12)
    rate = lam * load.decode_share * stretch
    residence = stretch[:, None] * (load.tpot_intervals + 1.0) * t[:, None]  # [pool, other group]
    marks = load.tpot_share * load.tpot_own_sq_ms2
    if window_ms is None:
        return rate * np.sum(marks * residence, axis=-1)
    w = window_ms[:, :, None]  # [pool, group, -]
    b = np.minimum(w, residence[:, None, :])
    overlap = w * residence[:, None, :] * b - (w + residence[:, None, :]) * b**2 / 2.0 + b**3 / 3.0
    return 2.0 * rate[:, None] * np.sum(marks[:, None, :] * overlap, axis=-1) / window_ms**2
