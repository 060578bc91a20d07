"""Erlang-C load limits of small pools: the tables the fleet MILP linearises (models/fleet.py, rows (7)).

A pool of ``n`` GPUs with ``s`` KV slots each is an M/G/c queue with ``c = n s``
slot-servers (sizing.py).  Loaded to the utilisation cap ``a = rho_max c``, its
Erlang C falls as ``n`` grows (at a fixed utilisation more servers wait less):

* :func:`wait_free_gpus` is ``N``, the fewest GPUs at which a pool at the cap has
  ``C <= 0.01``, so Kimura's ``W99 = 0`` and the cap alone meets every wait
  budget for ``n >= N``;
* below ``N``, :func:`erlang_tables` gives ``a_max[n, m]``, the largest load of ``n``
  GPUs whose ``W99 = ln(C/0.01) R / (2 (c - a))`` (kimura.py) is within the budget
  ``SLO - f_m`` of TTFT floor level ``m`` (its floor ``f_m``), at the pool's
  ``R = E[S^2]/E[S] = (1 + Cs^2) E[S]``.  ``W99`` rises with ``a`` and with ``R``,
  so ``a_max`` is found by bisection and falls as ``R`` rises.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from optfleet.queueing.erlang import erlang_c
from optfleet.queueing.kimura import wait_quantile_s

CAP_WAIT_PROBABILITY = 0.01  # Erlang C at or below this: Kimura's W99 is 0 (at quantile q: the tail 1 - q, tail_probability)


def tail_probability(quantile: float) -> float:
    """``1 - q``, rounded to 12 decimals so that P99 gives exactly ``CAP_WAIT_PROBABILITY`` (0.01, not 1 - 0.99 in
    floating point): Kimura's ``W_q = 0`` when Erlang C is at or below it; the paper rule's floor allows this share of a
    pool's traffic above its level."""
    return round(1.0 - quantile, 12)
TABLE_MARGIN = 1e-6  # relative; below the wait limit only (see erlang_tables)
BISECTION_STEPS = 60


class TableShape(Protocol):
    """What a table needs of a pool: slots per GPU, the TTFT floor of each level, their count and its size ``N``."""

    slots_per_instance: int
    level_floors_ms: tuple[float, ...]
    levels: int
    table_instances: int


def wait_free_gpus(slots_per_instance: int, rho_max: float, quantile: float = 0.99) -> int:
    """``N``: the fewest GPUs (at least 1) whose pool, loaded to ``rho_max``, has Erlang C <= ``1 - quantile`` (0.01 at
    P99: W99 = 0)."""
    gpus = 1
    tail = tail_probability(quantile)
    while float(erlang_c(gpus * slots_per_instance, rho_max * gpus * slots_per_instance)) > tail:
        gpus += 1
    return gpus


def erlang_tables(options: Sequence[TableShape], ratio_ms: NDArray[np.float64], slo_ms: float, rho_max: float,
                  quantile: float = 0.99) -> list[NDArray[np.float64]]:
    """Per pool j, ``a_max[n, m]`` for ``n < N_j`` GPUs and floor level ``m``: the largest load meeting
    ``W_q <= SLO - f_jm`` (Kimura's wait at ``quantile``, W99 by default) (``f_jm = level_floors_ms[m]``) at ``R_j = ratio_ms[j]`` (bisection, all pools at once), capped at
    ``rho_max n s_j`` and less a relative ``TABLE_MARGIN`` where the wait limit (not the cap) decides.

    The tables depend on these numbers alone, and a MILP run asks for the same ones again and again (its
    relaxation at each pool's least moments, each refresh, each point of an ``explain`` curve, whose rate does not
    enter them), so the last ``TABLE_CACHE_SIZE`` answers are kept (:func:`_tables_of`) and each call gets its own copy.
    """
    shapes = tuple((int(o.slots_per_instance), tuple(float(f) for f in o.level_floors_ms), int(o.levels), int(o.table_instances))
                   for o in options)
    ratios = tuple(float(r) for r in np.asarray(ratio_ms, dtype=np.float64).ravel())
    return [table.copy() for table in _tables_of(shapes, ratios, float(slo_ms), float(rho_max), float(quantile))]


TABLE_CACHE_SIZE = 64  # tables kept by erlang_tables (the largest shipped instance's are some 100 kB each)


@functools.lru_cache(maxsize=TABLE_CACHE_SIZE)
def _tables_of(shapes: tuple[tuple[int, tuple[float, ...], int, int], ...], ratios: tuple[float, ...], slo_ms: float, rho_max: float,
               quantile: float) -> tuple[NDArray[np.float64], ...]:
    """:func:`erlang_tables` of pools given as ``(slots per GPU, level floors ms, levels, table size)``, computed once
    per distinct argument (read-only arrays: the caller copies them)."""
    if not shapes:
        return ()
    if len(ratios) != len(shapes):
        raise ValueError(f"erlang_tables: {len(shapes)} pools but {len(ratios)} ratios")
    servers = np.concatenate([(np.arange(size)[:, None] * slots * np.ones((1, levels))).ravel() for slots, _, levels, size in shapes])
    budget_s = np.concatenate([((slo_ms - np.asarray(floors)[None, :]) / 1000.0 * np.ones((size, 1))).ravel() for _, floors, _, size in shapes])
    # W99 depends on E[S] (1 + Cs^2) = R only
    mean_s = np.concatenate([np.full(size * levels, max(r, 1e-9) / 1000.0) for (_, _, levels, size), r in zip(shapes, ratios, strict=True)])
    lo = np.zeros_like(servers)
    hi = rho_max * servers
    ok_hi = wait_quantile_s(servers, hi, mean_s, 0.0, quantile) <= budget_s
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        ok = wait_quantile_s(servers, mid, mean_s, 0.0, quantile) <= budget_s
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid)
    # Loads strictly inside the wait limit keep a relative margin for the MILP solver's feasibility
    # tolerance (a row met to 1e-7 could otherwise put W99 a hair above its budget).
    flat = np.where(ok_hi, rho_max * servers, lo * (1.0 - TABLE_MARGIN))
    ends = np.cumsum([size * levels for _, _, levels, size in shapes])[:-1]
    tables = tuple(part.reshape((size, levels)) for part, (_, _, levels, size) in zip(np.split(flat, ends), shapes, strict=True))
    for table in tables:
        table.flags.writeable = False
    return tables
