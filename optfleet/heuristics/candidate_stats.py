"""Exact pool statistics of every two-pool (B, gamma) candidate at once.

The sweep scores hundreds of routings of one request mix.  Instead of routing
the atoms again for each, it precomputes prefix sums over the atoms sorted by
``L_total`` (DESIGN.md: "precompute per-bin moments once; evaluate candidates
vectorised").  With ``k = ceil(L_in/C_chunk)``, ``u = k + L_out`` and
``t_iter = W + H n_max phi(L)`` (``phi = 1`` flat, ``L / L_scale``
length-scaled), the service time is ``S = u t_iter`` so

    sum w S   = W sum(w u) + H n_max sum(w u phi)
    sum w S^2 = W^2 sum(w u^2) + 2 W H n_max sum(w u^2 phi) + (H n_max)^2 sum(w u^2 phi^2)

and every pool of a candidate is a difference of prefix sums:

    short(B, g) = P[L <= B] + Comp_B[B < L <= gB]
    long(B, g)  = P[all] - P[L <= B] - p_c Elig_B[B < L <= gB]

where ``Comp_B`` holds the compressed atoms (``L_in = B - L_out``) of the
eligible (``L_out < B``) band requests weighted by ``p_c``, and ``Elig_B`` the
same requests uncompressed.  The TTFT floor (pool_stats.py) is exact too: its
pool mean (fleetsim rule) is one more prefix column; its P99 (paper rule) with
flat iteration is a quantile of ``k`` read from prefix histograms.  For the
paper rule with length-scaled iteration the floor's quantile depends on each
request's own length, so it is computed per candidate from the routed atoms
(routing.py) — exact, but slower.  The results equal the evaluator's
(``pool_stats``) — a test checks it on every shipped instance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.fleet.plan import Plan, PoolPlan
from optfleet.fleet.pool_config import PoolConfig
from optfleet.fleet.pool_stats import QUANTILE, pool_stats
from optfleet.fleet.problem import FleetProblem
from optfleet.fleet.routing import route

# Feature columns summed over atoms: w, w u, w u phi, w u^2, w u^2 phi, w u^2 phi^2, w k.
_W, _WU, _WUP, _WU2, _WU2P, _WU2P2, _WK = range(7)


@dataclass(frozen=True)
class CandidateStats:
    """Per-candidate statistics of one pool (arrays over the candidates)."""

    share: NDArray[np.float64]
    mean_service_ms: NDArray[np.float64]
    service_scv: NDArray[np.float64]
    ttft_floor_ms: NDArray[np.float64]


def _features(u: NDArray, phi: NDArray, k: NDArray, w: NDArray) -> NDArray[np.float64]:
    """Rows w, w u, w u phi, w u^2, w u^2 phi, w u^2 phi^2, w k (one column per atom)."""
    out = np.empty((7, len(w)))
    np.copyto(out[_W], w)
    np.multiply(w, u, out=out[_WU])
    np.multiply(out[_WU], phi, out=out[_WUP])
    np.multiply(out[_WU], u, out=out[_WU2])
    np.multiply(out[_WU2], phi, out=out[_WU2P])
    np.multiply(out[_WU2P], phi, out=out[_WU2P2])
    np.multiply(w, k, out=out[_WK])
    return out


def _compressed_sums(u: NDArray, k: NDArray, w: NDArray, phi: float, starts: NDArray[np.int64]) -> NDArray[np.float64]:
    """Per-segment feature sums of compressed atoms, whose ``phi`` is one constant (their length is B)."""
    base = np.empty((4, len(w)))
    np.copyto(base[0], w)
    np.multiply(w, u, out=base[1])
    np.multiply(base[1], u, out=base[2])
    np.multiply(w, k, out=base[3])
    s = _segment_sums(base, starts)
    return np.stack([s[:, 0], s[:, 1], phi * s[:, 1], s[:, 2], phi * s[:, 2], phi * phi * s[:, 2], s[:, 3]], axis=1)


def _segment_sums(values: NDArray[np.float64], starts: NDArray[np.int64]) -> NDArray[np.float64]:
    """Row i = sums of the columns ``[starts[i], starts[i+1])`` of ``values`` (features x atoms).

    ``starts`` is sorted, begins at 0 and ends at the number of atoms; empty segments sum to 0.
    """
    padded = np.concatenate([values, np.zeros((values.shape[0], 1))], axis=1)
    sums = np.add.reduceat(padded, starts[:-1], axis=1).T
    return np.where((np.diff(starts) > 0)[:, None], sums, 0.0)


def _positions_of(mask: NDArray[np.bool_], starts: NDArray[np.int64]) -> NDArray[np.int64]:
    """``starts`` re-expressed as positions inside the sub-array ``values[mask]``."""
    return np.concatenate(([0], np.cumsum(mask)))[starts]


def _moments(sums: NDArray[np.float64], config: PoolConfig) -> tuple[NDArray, NDArray, NDArray]:
    """(share, E[S] ms, Cs^2) from feature sums (rows = candidates) for a pool config."""
    w, hn = config.w_ms, config.h_ms_per_slot * config.slots_per_gpu
    share = sums[:, _W]
    first = w * sums[:, _WU] + hn * sums[:, _WUP]
    second = w * w * sums[:, _WU2] + 2 * w * hn * sums[:, _WU2P] + hn * hn * sums[:, _WU2P2]
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(share > 0, first / share, 0.0)
        scv = np.where(share > 0, np.maximum(second * share / (first * first) - 1.0, 0.0), 0.0)
    return share, mean, scv


def _quantile_chunks(hist: NDArray[np.float64], share: NDArray[np.float64]) -> NDArray[np.int64]:
    """Lower 0.99-quantile of k from histograms (rows = candidates, columns = k)."""
    cumulative = np.cumsum(hist, axis=1)
    target = (QUANTILE * share * (1.0 - 1e-9))[:, None]
    return np.argmax(cumulative >= target, axis=1)


class CandidateTables:
    """Prefix sums of one problem's request mix at every boundary and ``gamma B``, built once.

    Prefix sums are only ever read at the positions of the lengths B and
    ``gamma B`` of the candidates, so the atoms are summed per segment between
    consecutive such positions (one ``reduceat`` pass) and the prefix is the
    cumulative sum over those few segments.  Each boundary then needs one pass
    over its band for the compressed requests.
    """

    def __init__(self, problem: FleetProblem, boundaries: tuple[int, ...], gammas: tuple[float, ...]) -> None:
        self.problem = problem
        self.gammas = np.asarray(gammas, dtype=np.float64)
        mix = problem.mix
        self.long = problem.pool(problem.long_window_tokens)
        self.chunk = self.long.chunk_tokens
        self.l_total = mix.l_total
        self.l_out = mix.l_out
        self.w = mix.prob
        self.k = -(-mix.l_in // self.chunk)
        self.scaled = self.long.length_scale_tokens is not None
        self.phi = self._phi(self.l_total.astype(np.float64))
        self.k_max = int(-(-problem.long_window_tokens // self.chunk))
        self.features = _features(self.k + self.l_out, self.phi, self.k, self.w)
        cuts = np.concatenate([np.asarray(boundaries, dtype=np.float64)[:, None] * np.concatenate(([1.0], self.gammas))[None, :]]).ravel()
        positions = np.unique(np.concatenate(([0, len(self.w)], np.searchsorted(self.l_total, cuts, side="right"))))
        self._positions = positions
        self._prefix_at = self._cumulative(self.features, positions)
        self._hist_at = self._cumulative_hist(self.k, self.w, positions) if self._needs_hist else None

    @property
    def _needs_hist(self) -> bool:
        return not self.scaled and self.problem.ttft_rule == "paper"

    def _phi(self, l_total: NDArray[np.float64]) -> NDArray[np.float64]:
        if self.scaled:
            return l_total / float(self.long.length_scale_tokens)
        return np.ones_like(l_total)

    def _row(self, position: NDArray[np.int64] | int) -> NDArray[np.int64]:
        return np.searchsorted(self._positions, position)

    def _cumulative(self, values: NDArray[np.float64], positions: NDArray[np.int64]) -> NDArray[np.float64]:
        """Row i = sum of ``values`` over atoms ``[positions[0], positions[i])`` (positions sorted, first = 0)."""
        sums = _segment_sums(values, positions - positions[0])
        return np.vstack([np.zeros((1, values.shape[0])), np.cumsum(sums, axis=0)])

    def _cumulative_hist(self, k: NDArray[np.int64], w: NDArray[np.float64], positions: NDArray[np.int64]) -> NDArray[np.float64]:
        """Row i = histogram over k of the weights of atoms ``[positions[0], positions[i])``."""
        width = self.k_max + 1
        count = len(positions) - 1
        segment = np.repeat(np.arange(count), np.diff(positions))
        flat = np.bincount(segment * width + k, weights=w, minlength=count * width)[: count * width]
        return np.vstack([np.zeros((1, width)), np.cumsum(flat.reshape(count, width), axis=0)])

    def homogeneous(self) -> CandidateStats:
        """Statistics of the single long pool serving everything."""
        sums = self._prefix_at[-1:]
        share, mean, scv = _moments(sums, self.long)
        hist = self._hist_at[-1:] if self._hist_at is not None else None
        floor = self._floor(sums, self.long, hist)
        if floor is None:
            floor = np.array([self._exact_floor(Plan((PoolPlan("long", self.problem.long_window_tokens, 0),)))[0]])
        return CandidateStats(share, mean, scv, floor)

    def two_pool(self, boundary: int) -> tuple[CandidateStats, CandidateStats]:
        """(short, long) statistics for boundary B and every gamma of the table."""
        pc = self.problem.compressible_fraction
        short_cfg = self.problem.pool(boundary)
        lo = int(np.searchsorted(self.l_total, boundary, side="right"))
        ends = np.searchsorted(self.l_total, self.gammas * boundary, side="right")
        band = slice(lo, int(ends[-1]))
        l_out = self.l_out[band]
        eligible = l_out < boundary
        w_moved = self.w[band] * eligible * pc
        k_comp = -(-(boundary - l_out) // self.chunk)
        phi_comp = self._phi(np.array([float(boundary)]))[0]
        starts = np.concatenate(([lo], ends)) - lo
        comp = np.cumsum(_compressed_sums(k_comp + l_out, k_comp, w_moved, phi_comp, starts), axis=0)
        base, at = self._prefix_at[self._row(lo)], self._prefix_at[self._row(ends)]
        moved_orig = pc * (at - base[None, :])
        if not eligible.all():
            moved_orig -= pc * np.cumsum(_segment_sums(self.features[:, band] * ~eligible[None, :], starts), axis=0)
        short_sums = base[None, :] + comp
        long_sums = self._prefix_at[-1][None, :] - base[None, :] - moved_orig
        short = _moments(short_sums, short_cfg)
        long = _moments(long_sums, self.long)
        short_hist = long_hist = None
        if self._hist_at is not None:
            h_base, h_at = self._hist_at[self._row(lo)], self._hist_at[self._row(ends)]
            h_moved = pc * (h_at - h_base[None, :])
            if not eligible.all():
                h_moved -= pc * self._cumulative_hist(self.k[band][~eligible], self.w[band][~eligible], _positions_of(~eligible, starts))[1:]
            short_hist = h_base[None, :] + self._cumulative_hist(k_comp, w_moved, starts)[1:]
            long_hist = (self._hist_at[-1] - h_base)[None, :] - h_moved
        short_floor = self._floor(short_sums, short_cfg, short_hist)
        long_floor = self._floor(long_sums, self.long, long_hist)
        if short_floor is None or long_floor is None:
            pools = (PoolPlan("short", boundary, 0), PoolPlan("long", self.problem.long_window_tokens, 0))
            exact = np.array([self._exact_floor(Plan(pools, gamma=float(g))) for g in self.gammas])
            short_floor, long_floor = exact[:, 0], exact[:, 1]
        return CandidateStats(*short, short_floor), CandidateStats(*long, long_floor)

    def _floor(self, sums: NDArray, config: PoolConfig, hist: NDArray | None) -> NDArray[np.float64] | None:
        """Vectorised TTFT floor, or None when it needs the per-candidate exact path."""
        share = sums[:, _W]
        if self.problem.ttft_rule == "fleetsim":
            with np.errstate(divide="ignore", invalid="ignore"):
                mean_k = np.where(share > 0, sums[:, _WK] / share, 0.0)
            return mean_k * (config.w_ms + config.h_ms_per_slot)
        if hist is None or self.scaled:
            return None
        t_iter = float(config.iteration_ms(0.0))
        return np.where(share > 0, (_quantile_chunks(hist, share) + 1) * t_iter, 0.0)

    def _exact_floor(self, plan: Plan) -> list[float]:
        traffic = route(self.problem.mix, plan, self.problem.compressible_fraction)
        return [
            pool_stats(self.problem.pool(p.window_tokens), t.l_in, t.l_out, t.weight, self.problem.ttft_rule).ttft_floor_ms
            for p, t in zip(plan.pools, traffic, strict=True)
        ]
