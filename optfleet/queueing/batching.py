"""A load-dependent service model of a continuously batching pool (``slo.service_model: batching``).

The slot model (sizing.py) charges every request the full-batch iteration ``W + H n_max``.  A vLLM-style
engine iterates at ``t(k) = W + H phi k`` with ``k`` the sequences it holds (``phi`` the mean
length-scaling factor of the held sequences, 1 for flat iteration).  A pool of ``n`` GPUs with ``s`` slots
each (``c = n s``) is modelled per request ``i`` by its slot-holding iterations

    h_i = ceil(L_in/C) + max(L_out, 1) + 1/2 + Q,

its prefill chunks, its decode steps, half an iteration for joining the batch at the next iteration
boundary, and ``Q``, its wait behind other prefills on its GPU (each iteration prefills at most ``C``
tokens, first come first served).  Three parts, all vectorised over pools and instance counts:

* **Operating point** (mean field).  A GPU receives ``lambda_g = lambda / n`` requests per second; its
  prefill stage is an M/G/1 queue in iterations with work ``tau = L_in / C``, load ``u = lambda_g t E[tau]``
  and mean wait ``E[Q] = lambda_g t E[tau^2] / (2 (1 - u))`` (Pollaczek-Khinchine).  By Little's law the
  mean held sequences are ``k = lambda_g E[h] t`` and the iteration time is the smallest fixed point of

      t = W + H phi lambda_g (E[X] + 1/2 + E[Q](t)) t,        E[X] = E[ceil(L_in/C) + max(L_out, 1)],

  found by monotone iteration from ``t = W``; utilisation (slot occupancy) is ``k / s``.  No fixed point
  below the full-batch iteration ``W + H phi s`` (or a prefill load ``u >= 1``) means overload.
* **Wait for a slot.**  The pool's number in system ``N`` is a birth-death chain with arrival rate
  ``lambda`` and departure rate ``i / (t(i/n) E[h])`` for ``i <= c`` (the held sequences spread evenly
  over the GPUs), constant above ``c``.  Its stationary law below ``c`` is a negative binomial,

      pi(i) ~ C(i + b, i) x^i,   x = lambda E[h] H phi / n,   b = n W / (H phi),

  (the product of the rates telescopes into ``Gamma(b + i + 1) / (Gamma(b + 1) i!)``), and geometric above
  ``c`` with ratio ``q = lambda E[h] (W + H phi s) / c``, so the probability of waiting is

      P_wait = f(c) / (1 - q) / (F(c - 1) + f(c) / (1 - q))

  with ``f``, ``F`` the pmf and cdf of NB(b + 1, 1 - x); ``H = 0`` gives Erlang C.  The wait tail above
  ``c`` is the slot model's with ``P_wait`` in place of Erlang C and Kimura's two-moment scaling
  (kimura.py): ``W99 = ln(P_wait / 0.01) (1 + Cs^2) / (2 (mu_c - lambda))``, ``mu_c = c / ((W + H phi s) E[h])``
  (``Cs^2`` of ``h``).
* **P99 TTFT** ``= W99 + t y``, ``y`` the 0.99 point of the pool's in-GPU time to first token in
  iterations: the mixture over its requests of ``ceil(L_in/C) + 1 + J + Q`` with ``J ~ U(0, 1)`` the join
  and ``Q`` the M/G/1 waiting time of the prefill stage, a geometric sum of residual prefill works
  (Pollaczek-Khinchine):

      Q = R_1 + ... + R_K,   P[K = k] = (1 - u) u^k,   P[R > r] = E[(tau - r)^+] / E[tau],

  computed with ``tau`` rounded to 1/8 iteration (the residual law is then uniform within each bin, placed
  at its midpoint on a grid of 1/16 iteration) by one FFT per pool, ``Q^(z) = (1 - u) / (1 - u R^(z))`` times the transforms of ``J``
  and of the chunk mix, evaluated on a circle of radius ``a < 1`` so the wrapped-around tail weighs at
  most ``a^N = 1e-12``.  Adding the slot wait's quantile to the in-GPU one is conservative, as the paper
  rule's sum of a wait quantile and a floor quantile is.

The model is an approximation of the engine (mean-field iteration time, exponential prefill-wait tail,
Kimura's scaling), validated against the batching simulator by ``benchmarks/bench_batching.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from optfleet.queueing.erlang import erlang_c

RowsT = TypeVar("RowsT")
QUANTILE = 0.99
JOIN_ITERATIONS = 0.5  # mean wait for the next iteration boundary (uniform over one iteration)
FIXED_POINT_STEPS = 2000
FIXED_POINT_TOLERANCE = 1e-12  # relative
PREFILL_BINS = 8  # grid points per iteration of the prefill-wait distribution
GRID_POINTS = 8192  # first FFT length (512 iterations at 16 points each); doubled while the 0.99 point lies beyond 90 % of it
ALIASING = 1e-12  # weight of the tail wrapped around the FFT grid (a^N)
# The in-GPU quantile's grid step (iterations): the join's uniform law sits at its cells' midpoints, so the model's join
# is at least the uniform one less this, and the 0.99 point is a grid point (in_gpu_quantile)
IN_GPU_GRID_ITERATIONS = 1.0 / (2 * PREFILL_BINS)


@dataclass(frozen=True)
class BatchingWorkload:
    """What the model needs of a pool's traffic, per pool (arrays broadcast over pools).

    ``chunk_share[p, c]`` is the share of pool p's requests with ``c`` prefill chunks and ``prefill_share[p, b]``
    the share whose prefill work ``tau = L_in / C`` rounds to ``b / PREFILL_BINS`` iterations (rows sum to 1).
    """

    rate_rps: NDArray[np.float64]
    mean_iterations: NDArray[np.float64]  # E[X] = E[ceil(L_in/C) + max(L_out, 1)]
    iterations_scv: NDArray[np.float64]  # Cs^2 of X
    phi: NDArray[np.float64]  # E[X phi] / E[X]: the length-scaling factor of a held sequence (1 flat)
    prefill_share: NDArray[np.float64]
    chunk_share: NDArray[np.float64]

    @property
    def prefill_moments(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``(E[tau], E[tau^2])`` in iterations, of the binned prefill work."""
        tau = np.arange(np.shape(self.prefill_share)[-1]) / PREFILL_BINS
        return self.prefill_share @ tau, self.prefill_share @ (tau * tau)


@dataclass(frozen=True)
class BatchingState:
    """The model at a instance count (arrays over pools): operating point, waits and P99 TTFT; ``stable`` is False
    under overload (then the waits and the TTFT are infinite and the utilisation is the slots' share held)."""

    stable: NDArray[np.bool_]
    iteration_ms: NDArray[np.float64]
    utilisation: NDArray[np.float64]
    prefill_load: NDArray[np.float64]
    prefill_wait_iterations: NDArray[np.float64]
    wait_probability: NDArray[np.float64]
    wait_p99_ms: NDArray[np.float64]
    in_gpu_p99_ms: NDArray[np.float64]

    @property
    def ttft_p99_ms(self) -> NDArray[np.float64]:
        return self.wait_p99_ms + self.in_gpu_p99_ms


def take_rows(load: RowsT, rows: NDArray[np.int64]) -> RowsT:
    """The pools ``rows`` of a workload (a dataclass of arrays over pools)."""
    return type(load)(*(np.asarray(getattr(load, f.name))[rows] for f in fields(load)))


def batching_state(load: BatchingWorkload, gpus: ArrayLike, slots_per_instance: ArrayLike, w_ms: ArrayLike, h_ms: ArrayLike) -> BatchingState:
    """Evaluate the model (module docstring) for ``gpus`` GPUs per pool (``gpus >= 1``)."""
    n = np.maximum(np.asarray(gpus, dtype=np.float64), 1.0)  # an empty pool (no GPU, no traffic) as one idle GPU
    s = np.asarray(slots_per_instance, dtype=np.float64)
    lam, ex, phi, e_tau, e_tau2 = np.broadcast_arrays(load.rate_rps, load.mean_iterations, load.phi, *load.prefill_moments)
    n, s, w, hphi = np.broadcast_arrays(n, s, np.asarray(w_ms, dtype=np.float64) / 1000.0, np.asarray(h_ms, dtype=np.float64) / 1000.0 * phi)
    lam_gpu = lam / n
    full_s = w + hphi * s

    def prefill_wait(t: NDArray) -> tuple[NDArray, NDArray]:
        u = lam_gpu * t * e_tau
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.where(u < 1.0, lam_gpu * t * e_tau2 / (2.0 * (1.0 - u)), np.inf)
        return u, q

    t = w.copy()
    # 0 x inf (H = 0 or no traffic, times an overflowing prefill queue) gives NaN: such a pool is overloaded or
    # unstable and takes the overload values below, so the warnings are silenced, not the values used
    with np.errstate(invalid="ignore"):
        for _ in range(FIXED_POINT_STEPS):
            _, q = prefill_wait(t)
            nxt = w + hphi * lam_gpu * (ex + JOIN_ITERATIONS + q) * t
            nxt = np.where(np.isfinite(nxt), np.minimum(nxt, 2.0 * full_s), 2.0 * full_s)  # past full_s is overload
            done = np.abs(nxt - t) <= FIXED_POINT_TOLERANCE * t
            t = nxt
            if done.all():
                break
        u, q = prefill_wait(t)
        hold = ex + JOIN_ITERATIONS + q
        held = lam_gpu * hold * t
    stable = (t <= full_s * (1.0 + 1e-12)) & (u < 1.0) & (held <= s) & (lam * hold * full_s < n * s)
    held = np.where(stable, held, s)
    p_wait = slot_wait_probability(lam, hold, n, s, w, hphi, stable)
    with np.errstate(divide="ignore", invalid="ignore"):
        drain = n * s / (full_s * hold) - lam
        wait_s = np.where(p_wait > 1.0 - QUANTILE,
                          np.log(p_wait / (1.0 - QUANTILE)) * (1.0 + np.asarray(load.iterations_scv)) / (2.0 * drain), 0.0)
    in_gpu = in_gpu_quantile(load.chunk_share, load.prefill_share, np.where(stable, u, 0.0), stable)
    inf = np.inf
    return BatchingState(
        stable=stable,
        iteration_ms=1000.0 * np.where(stable, t, full_s),
        utilisation=held / s,
        prefill_load=np.where(stable, u, np.minimum(u, 1.0)),
        prefill_wait_iterations=np.where(stable, q, inf),
        wait_probability=np.where(stable, p_wait, 1.0),
        wait_p99_ms=np.where(stable, 1000.0 * wait_s, inf),
        in_gpu_p99_ms=np.where(stable, 1000.0 * t * in_gpu, inf),
    )


def slot_wait_probability(lam: NDArray, hold: NDArray, n: NDArray, s: NDArray, w: NDArray, hphi: NDArray, stable: NDArray,
                          jump: ArrayLike = 1.0) -> NDArray:
    """``P_wait`` of the birth-death chain (module docstring); 1 where unstable.  ``jump > 1`` counts the chain in units
    of ``jump`` sequences (its mean unchanged, its variance ``jump`` times larger: batching_engine.py's prompt compute),
    so ``b + 1`` and ``c`` are divided by ``jump``; the negative binomial is taken at real ``c`` by its continuous
    extension (``F(c - 1) = I_{1 - x}(b + 1, c)``)."""
    jump = np.asarray(jump, dtype=np.float64)
    c = n * s
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = lam * hold * (w + hphi * s) / c
        x = lam * hold * hphi / n
        r = np.where(hphi > 0, n * w / np.where(hphi > 0, hphi, 1.0) + 1.0, 1.0) / jump
        units = c / jump
        log_pmf = (special.gammaln(units + r) - special.gammaln(r) - special.gammaln(units + 1.0) + r * np.log1p(-x)
                   + units * np.log(x))
        log_cdf = np.log(special.betainc(r, units, 1.0 - x))
        log_tail = log_pmf - np.log1p(-q)
        nb = np.exp(log_tail - np.logaddexp(log_cdf, log_tail))
    # H = 0: a constant iteration W, the M/M/c chain: Erlang C at load lambda E[h] W.
    flat = erlang_c(c, np.where(stable, lam * hold * w, 0.0))
    p = np.where(hphi > 0, nb, flat)
    return np.where(stable, np.clip(np.nan_to_num(p, nan=1.0), 0.0, 1.0), 1.0)


def in_gpu_quantile(chunk_share: NDArray, prefill_share: NDArray, prefill_load: NDArray, stable: NDArray) -> NDArray[np.float64]:
    """``y`` (iterations): the 0.99 point of ``ceil(L_in/C) + 1 + J + Q`` per pool (module docstring), to the grid's
    1/16 iteration; ``inf`` where not ``stable``.  Rows of the share matrices are pools; ``prefill_load`` is ``u``."""
    chunk_share, prefill_share = np.atleast_2d(chunk_share), np.atleast_2d(prefill_share)
    u = np.broadcast_to(np.asarray(prefill_load, dtype=np.float64), (max(len(chunk_share), np.size(prefill_load)),)).copy()
    chunk_share = np.broadcast_to(chunk_share, (len(u), chunk_share.shape[-1]))
    prefill_share = np.broadcast_to(prefill_share, (len(u), prefill_share.shape[-1]))
    # The residual (equilibrium) law of the binned work: P[R = r] = P[tau > r] / E[tau] (bins), 0 without prefill work.
    mean_bins = prefill_share @ np.arange(prefill_share.shape[-1])
    survival = 1.0 - np.cumsum(prefill_share, axis=-1)
    residual = np.where(mean_bins[:, None] > 0, survival / np.where(mean_bins > 0, mean_bins, 1.0)[:, None], 0.0)
    u = np.where(mean_bins > 0, u, 0.0)
    # The FFT grid has two points per prefill bin: each bin's mass (a residual in [k, k+1) bins is uniform there,
    # J uniform over [0, 1)) sits at the bin's midpoint, so the sum of terms has no rounding bias.
    step = round(1.0 / IN_GPU_GRID_ITERATIONS)  # grid points per iteration, two per prefill bin
    offsets = (np.arange(chunk_share.shape[-1]) + 1) * step  # first token: (chunks + 1) iterations after join and wait
    first = np.zeros((len(u), offsets[-1] + 1))
    first[:, offsets] = chunk_share
    return pk_quantile_points(first, midpoints(np.full(PREFILL_BINS, 1.0 / PREFILL_BINS)), midpoints(residual), u, stable) / step


def midpoints(cell_mass: NDArray[np.float64]) -> NDArray[np.float64]:
    """Masses of cells of two grid points each, placed at the cells' midpoints (the odd points): a law uniform within
    each cell keeps its mean on the grid."""
    grid = np.zeros(np.shape(cell_mass)[:-1] + (2 * np.shape(cell_mass)[-1],))
    grid[..., 1::2] = cell_mass
    return grid


def pk_quantile_points(first: NDArray, join: NDArray, residual: NDArray, prefill_load: NDArray, stable: NDArray) -> NDArray[np.float64]:
    """The 0.99 point, in grid points, of ``F + J + Q`` per row: ``F`` with law ``first[row]``, ``J`` with law ``join``
    (one row for all) and ``Q`` the Pollaczek-Khinchine waiting time of an M/G/1 queue at load ``prefill_load[row]``
    whose residual work has law ``residual[row]``: ``Q^(z) = (1 - u) / (1 - u R^(z))``.  One FFT per row, on a circle
    of radius ``a < 1`` so the wrapped-around tail weighs at most ``a^N = ALIASING``; the grid doubles while the point
    lies beyond 90 % of it.  ``inf`` where not ``stable`` or beyond 2^22 points."""
    u = np.asarray(prefill_load, dtype=np.float64)
    result = np.full(len(u), np.inf)
    todo = np.asarray(stable, dtype=bool).reshape(-1) & np.ones(len(u), dtype=bool)
    points = GRID_POINTS
    while todo.any():
        points = max(points, int(2 ** np.ceil(np.log2(first.shape[-1] + len(join) + residual.shape[-1] + 1))))
        tilt = (ALIASING ** (1.0 / points)) ** np.arange(points)
        rows = np.flatnonzero(todo)
        rho = u[rows][:, None]
        transform = (np.fft.rfft(first[rows] * tilt[: first.shape[-1]], n=points) * np.fft.rfft(join * tilt[: len(join)], n=points)
                     * (1.0 - rho) / (1.0 - rho * np.fft.rfft(residual[rows] * tilt[: residual.shape[-1]], n=points)))
        cdf = np.cumsum(np.fft.irfft(transform, n=points) / tilt, axis=-1)
        reached = cdf >= QUANTILE
        index = np.argmax(reached, axis=-1)
        found = reached.any(axis=-1) & (index < 0.9 * points)
        result[rows[found]] = index[found]
        todo[rows[found]] = False
        if points >= 2**22:  # 0.99 point beyond 2^22 points: as good as never
            break
        points *= 2
    return result


def workload_moments(l_in: ArrayLike, l_out: ArrayLike, weight: ArrayLike, chunk_tokens: int, length_scale_tokens: int | None,
                     chunk_columns: int) -> tuple[float, float, float, NDArray[np.float64], NDArray[np.float64]]:
    """``(E[X], Cs^2 of X, phi, prefill shares, chunk shares)`` of weighted requests (:class:`BatchingWorkload`'s
    per-request fields; ``chunk_columns`` is the length of the chunk-share row, the prefill-share row is
    ``PREFILL_BINS`` times as long)."""
    w = np.asarray(weight, dtype=np.float64)
    held = w > 0  # routed traffic lists every atom of the mix, most of them at weight 0 in a given pool
    l_in, l_out, w = np.asarray(l_in, dtype=np.int64)[held], np.asarray(l_out, dtype=np.int64)[held], w[held]
    total = float(w.sum())
    chunks = -(-l_in // chunk_tokens)
    x = (chunks + np.maximum(l_out, 1)).astype(np.float64)
    wx = w * x  # elementwise sums, not BLAS dot products: those are slower on vectors this size under threads' contention
    ex = float(wx.sum()) / total
    scv = max(float((wx * x).sum()) / total / (ex * ex) - 1.0, 0.0)
    phi = 1.0 if length_scale_tokens is None else float((wx * (l_in + l_out)).sum()) / length_scale_tokens / total / ex
    bins = np.rint(l_in * PREFILL_BINS / chunk_tokens).astype(np.int64)
    width = chunk_columns * PREFILL_BINS
    prefill = np.bincount(bins, weights=w, minlength=width)[:width] / total
    shares = np.bincount(chunks, weights=w, minlength=chunk_columns)[:chunk_columns] / total
    return ex, scv, phi, prefill, shares


