"""Exact pool statistics of every two-pool (B, gamma) candidate at once.

The sweep scores hundreds of routings of one request mix.  Instead of routing
the atoms again for each, it precomputes prefix sums over the atoms sorted by
``L_total`` ("precompute per-bin moments once; evaluate candidates
vectorised").  A pool's service time is ``S = W u + s v`` with ``u =
ceil(L_in/C) + L_out`` and ``v = a . beta`` (pool_config.py): ``a`` is a row of
five per-request monomials, the same for every pool of the instance (one chunk
size), and ``beta`` the pool's coefficients (the paper's ``H``, or the engine's
step reduced at that pool's window).  So

    sum w S   = W sum(w u) + s beta . sum(w a)
    sum w S^2 = W^2 sum(w u^2) + 2 W s beta . sum(w u a) + s^2 beta' sum(w a a') beta

and every pool of a candidate is a difference of prefix sums of those
monomials (read only at the lengths B and gamma B, so the atoms are summed per
segment between those cut points in one pass), combined with its own ``W``,
``s`` and ``beta``:

    short(B, g) = P[L <= B] + Comp_B[B < L <= gB]
    long(B, g)  = P[all] - P[L <= B] - p_c Elig_B[B < L <= gB]

where ``Comp_B`` holds the compressed atoms (``L_in = B - L_out``) of the
eligible (``L_out < B``) band requests weighted by ``p_c``, and ``Elig_B`` the
same requests uncompressed.  The TTFT floor (pool_stats.py) is exact too: its
pool mean (fleetsim rule) is one more prefix column; its P99 (paper rule) with
flat iteration, and the engine model's, is a function of the quantile of ``k``
read from prefix histograms.  For the paper rule with length-scaled iteration
the floor's quantile depends on each request's own length, so it is computed
per candidate from the routed atoms (routing.py) — exact, but slower.  The
compressed band requests of all boundaries are handled in one concatenated
pass (``bincount`` by candidate), so the cost is one pass over the atoms plus
one over the bands, whatever the number of candidates.  The results equal the
evaluator's (``pool_stats``) — a test checks it on every candidate of every
shipped instance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.problems.fleet.plan import Plan, PoolPlan
from optfleet.problems.fleet.pool_config import PoolConfig
from optfleet.problems.fleet.pool_stats import QUANTILE, pool_stats
from optfleet.problems.fleet.problem import FleetProblem
from optfleet.problems.fleet.routing import route

BASIS = 5  # monomials of a (pool_config.py's slot_work_basis)
_PAIRS = np.triu_indices(BASIS)
# Feature rows summed over atoms: w, w u, w u^2, w k, w a (5), w u a (5), w a_r a_s (r <= s, 15).
_W, _WU, _WU2, _WK = range(4)
_WA = slice(4, 4 + BASIS)
_WUA = slice(4 + BASIS, 4 + 2 * BASIS)
_WAA = slice(4 + 2 * BASIS, 4 + 2 * BASIS + len(_PAIRS[0]))
FEATURES = 4 + 2 * BASIS + len(_PAIRS[0])


@dataclass(frozen=True)
class CandidateStats:
    """Per-candidate statistics of one pool (arrays over the candidates)."""

    share: NDArray[np.float64]
    mean_service_ms: NDArray[np.float64]
    service_scv: NDArray[np.float64]
    ttft_floor_ms: NDArray[np.float64]
    mean_prefill_compute_ms: NDArray[np.float64]


def _features(u: NDArray, a: NDArray, k: NDArray, w: NDArray) -> NDArray[np.float64]:
    """The feature rows above (one column per atom) of atoms with ``u``, basis rows ``a`` (atoms x 5), ``k``, ``w``."""
    out = np.empty((FEATURES, len(w)))
    np.copyto(out[_W], w)
    np.multiply(w, u, out=out[_WU])
    np.multiply(out[_WU], u, out=out[_WU2])
    np.multiply(w, k, out=out[_WK])
    out[_WA] = (w[:, None] * a).T
    out[_WUA] = out[_WA] * u
    out[_WAA] = out[_WA][_PAIRS[0]] * a.T[_PAIRS[1]]
    return out


def _moments(sums: NDArray[np.float64], w_ms: NDArray | float, slots: NDArray | float, beta: NDArray[np.float64]) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """(share, E[S] ms, Cs^2, E[P] ms) from feature sums (rows = candidates), each candidate's pool with ``W``, ``s``
    and ``beta`` (rows of ``beta`` per candidate, or one row for all); ``P = a_2 beta_2 + a_3 beta_3``, the prefill
    compute (pool_config.py)."""
    beta = np.broadcast_to(np.asarray(beta, dtype=np.float64).reshape(-1, BASIS), (len(sums), BASIS))
    share = sums[:, _W]
    work = np.einsum("cr,cr->c", sums[:, _WA], beta)
    u_work = np.einsum("cr,cr->c", sums[:, _WUA], beta)
    weights = beta[:, _PAIRS[0]] * beta[:, _PAIRS[1]] * np.where(_PAIRS[0] == _PAIRS[1], 1.0, 2.0)
    work2 = np.einsum("cp,cp->c", sums[:, _WAA], weights)
    first = w_ms * sums[:, _WU] + slots * work
    second = w_ms * w_ms * sums[:, _WU2] + 2 * w_ms * slots * u_work + slots * slots * work2
    prefill = sums[:, _WA][:, 2] * beta[:, 2] + sums[:, _WA][:, 3] * beta[:, 3]
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(share > 0, first / share, 0.0)
        scv = np.where(share > 0, np.maximum(second * share / (first * first) - 1.0, 0.0), 0.0)
        mean_prefill = np.where(share > 0, prefill / share, 0.0)
    return share, mean, scv, mean_prefill


def _stats(moments: tuple[NDArray, NDArray, NDArray, NDArray], floor: NDArray[np.float64]) -> CandidateStats:
    share, mean, scv, prefill = moments
    return CandidateStats(share, mean, scv, floor, prefill)


def _quantile_chunks(hist: NDArray[np.float64], share: NDArray[np.float64], quantile: float = QUANTILE) -> NDArray[np.int64]:
    """Lower ``quantile`` of k (the problem's ``ttft_quantile``, 0.99 for an instance file) from histograms (rows = candidates, columns = k)."""
    cumulative = np.cumsum(hist, axis=1)
    target = (quantile * share * (1.0 - 1e-9))[:, None]
    return np.argmax(cumulative >= target, axis=1)


class CandidateTables:
    """Exact statistics of the homogeneous fleet and of every (B, gamma) two-pool candidate.

    Candidate rows are ordered boundary-major: row ``i * len(gammas) + g``.
    All pools share the instance's hardware (one GPU type: the same W, H and
    chunk size); only the slots per GPU differ by window.
    """

    def __init__(self, problem: FleetProblem, boundaries: tuple[int, ...], gammas: tuple[float, ...]) -> None:
        self.problem = problem
        self.boundaries = np.asarray(boundaries, dtype=np.int64)
        self.gammas = np.asarray(gammas, dtype=np.float64)
        mix = problem.mix
        self.long = problem.pool(problem.long_window_tokens)
        self.chunk = self.long.chunk_tokens
        self.l_total = mix.l_total
        self.l_out = mix.l_out
        self.w = mix.prob
        self.k = np.ceil(mix.l_in / self.chunk).astype(np.int64)  # exact for integers; faster than integer division
        self.scaled = self.long.length_scale_tokens is not None
        self.k_max = int(-(-problem.long_window_tokens // self.chunk))
        self.features = _features(self.k + self.l_out, self.long.slot_work_basis(mix.l_in, self.l_out), self.k, self.w)
        self.short_pools = [problem.pool(int(b)) for b in self.boundaries]
        self.lo = np.searchsorted(self.l_total, self.boundaries, side="right")
        self.ends = np.searchsorted(self.l_total, self.boundaries[:, None] * self.gammas[None, :], side="right")
        cuts = np.unique(np.concatenate(([0, len(self.w)], self.lo, self.ends.ravel())))
        self._cuts = cuts
        self._prefix_at = self._cumulative(_segment_sums(self.features, cuts))
        self._hist_at = None
        if self._needs_hist:
            segment = np.repeat(np.arange(len(cuts) - 1), np.diff(cuts))
            self._hist_at = self._cumulative(self._hists(segment, self.k, self.w, len(cuts) - 1))

    @property
    def _needs_hist(self) -> bool:
        return not self.scaled and self.problem.ttft_rule == "paper"

    def _at(self, position: NDArray[np.int64]) -> NDArray[np.int64]:
        """Row of the cumulative tables for an atom position (always one of the cut points)."""
        return np.searchsorted(self._cuts, position)

    @staticmethod
    def _cumulative(sums: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.vstack([np.zeros((1, sums.shape[1])), np.cumsum(sums, axis=0)])

    def _hists(self, group: NDArray[np.int64], k: NDArray[np.int64], w: NDArray[np.float64], count: int) -> NDArray[np.float64]:
        """``(count, k_max + 1)`` histograms over k of the weights, by group."""
        width = self.k_max + 1
        return np.bincount(group * width + k, weights=w, minlength=count * width)[: count * width].reshape(count, width)

    def homogeneous(self) -> CandidateStats:
        """Statistics of the single long pool serving everything."""
        sums = self._prefix_at[-1:]
        moments = _moments(sums, self.long.base_ms, self.long.slots_per_instance, self.long.slot_work_coefficients)
        hist = self._hist_at[-1:] if self._hist_at is not None else None
        floor = self._floor(sums, [self.long], hist)
        if floor is None:
            floor = np.array([self._exact_floor(Plan((PoolPlan("long", self.problem.long_window_tokens, 0),)))[0]])
        return _stats(moments, floor)

    def two_pool(self) -> tuple[CandidateStats, CandidateStats]:
        """(short, long) statistics of every candidate row.

        For each boundary, its band ``B < L <= gamma_max B`` (a contiguous run
        of atoms) is cut at every ``gamma B``; the compressed features are
        summed per piece (``reduceat``) and accumulated over gamma, since an
        atom in the band at gamma_g is in it for every larger gamma too.
        """
        n_b, n_g = len(self.boundaries), len(self.gammas)
        rows = n_b * n_g
        pc = self.problem.compressible_fraction
        width = self.k_max + 1
        comp = np.zeros((n_b, n_g, FEATURES))
        stuck = np.zeros((n_b, n_g, FEATURES))
        comp_hist = np.zeros((n_b, n_g, width)) if self._hist_at is not None else None
        stuck_hist = np.zeros((n_b, n_g, width)) if self._hist_at is not None else None
        for i, boundary in enumerate(self.boundaries):
            band = slice(self.lo[i], self.ends[i, -1])
            starts = np.concatenate(([0], self.ends[i] - self.lo[i]))
            l_out = self.l_out[band]
            blocked = l_out >= boundary
            moved = self.w[band] * pc
            if blocked.any():
                moved[blocked] = 0.0
                stuck[i] = _segment_sums(self.features[:, band] * blocked, starts)
            l_in_comp = np.maximum(boundary - l_out, 0)  # blocked atoms carry weight 0
            k_comp = np.ceil(l_in_comp / self.chunk).astype(np.int64)
            basis = self.long.slot_work_basis(l_in_comp, l_out)
            comp[i] = _segment_sums(_features(k_comp + l_out, basis, k_comp, moved), starts)
            if comp_hist is not None:
                piece = np.repeat(np.arange(n_g), np.diff(starts))
                comp_hist[i] = self._hists(piece, k_comp, moved, n_g)
                if blocked.any():
                    stuck_hist[i] = self._hists(piece[blocked], self.k[band][blocked], self.w[band][blocked], n_g)
        comp_sums = np.cumsum(comp, axis=1).reshape(rows, FEATURES)
        lo_at = self._prefix_at[self._at(np.repeat(self.lo, n_g))]
        end_at = self._prefix_at[self._at(self.ends.ravel())]
        moved_orig = pc * (end_at - lo_at - np.cumsum(stuck, axis=1).reshape(rows, FEATURES))
        short_sums = lo_at + comp_sums
        long_sums = self._prefix_at[-1][None, :] - lo_at - moved_orig
        shorts = [pool for pool in self.short_pools for _ in range(n_g)]
        short = _moments(short_sums, np.array([p.base_ms for p in shorts]), np.array([p.slots_per_instance for p in shorts]),
                         np.array([p.slot_work_coefficients for p in shorts]))
        long = _moments(long_sums, self.long.base_ms, self.long.slots_per_instance, self.long.slot_work_coefficients)
        short_hist = long_hist = None
        if self._hist_at is not None:
            h_lo = self._hist_at[self._at(np.repeat(self.lo, n_g))]
            h_moved = pc * (self._hist_at[self._at(self.ends.ravel())] - h_lo - np.cumsum(stuck_hist, axis=1).reshape(rows, width))
            short_hist = h_lo + np.cumsum(comp_hist, axis=1).reshape(rows, width)
            long_hist = self._hist_at[-1][None, :] - h_lo - h_moved
        short_floor = self._floor(short_sums, shorts, short_hist)
        long_floor = self._floor(long_sums, [self.long] * rows, long_hist)
        if short_floor is None or long_floor is None:
            exact = np.array([
                self._exact_floor(Plan((PoolPlan("short", int(b), 0), PoolPlan("long", self.problem.long_window_tokens, 0)), gamma=float(g)))
                for b in self.boundaries for g in self.gammas
            ])
            short_floor, long_floor = exact[:, 0], exact[:, 1]
        return _stats(short, short_floor), _stats(long, long_floor)

    def _floor(self, sums: NDArray, pools: list[PoolConfig], hist: NDArray | None) -> NDArray[np.float64] | None:
        """Vectorised TTFT floor per candidate (its pool's config in ``pools``), or None when it needs the
        per-candidate exact path."""
        share = sums[:, _W]
        if self.problem.ttft_rule == "fleetsim":
            w, h = self.long.w_ms, self.long.h_ms_per_slot
            with np.errstate(divide="ignore", invalid="ignore"):
                mean_k = np.where(share > 0, sums[:, _WK] / share, 0.0)
            return mean_k * (w + h)
        if hist is None or self.scaled:
            return None
        chunks = _quantile_chunks(hist, share, self.problem.ttft_quantile)
        floors = np.array([float(pool.chunk_floor_ms(m)) for pool, m in zip(pools, chunks, strict=True)])
        return np.where(share > 0, floors, 0.0)

    def _exact_floor(self, plan: Plan) -> list[float]:
        traffic = route(self.problem.mix, plan, self.problem.compressible_fraction)
        return [
            pool_stats(self.problem.pool(p.window_tokens), t.l_in, t.l_out, t.weight, self.problem.ttft_rule, self.problem.ttft_quantile).ttft_floor_ms
            for p, t in zip(plan.pools, traffic, strict=True)
        ]


def _segment_sums(values: NDArray[np.float64] | list[NDArray[np.float64]], starts: NDArray[np.int64]) -> NDArray[np.float64]:
    """Row i = sums of ``values[r][starts[i]:starts[i+1]]`` for each row r; empty segments sum to 0.

    The segments tile ``[0, len)``, so ``reduceat`` over the non-empty segments' starts is exact.
    """
    nonempty = np.diff(starts) > 0
    out = np.zeros((len(starts) - 1, len(values)))
    if nonempty.any():
        first = starts[:-1][nonempty]
        for r, row in enumerate(values):
            out[nonempty, r] = np.add.reduceat(row, first)
    return out
