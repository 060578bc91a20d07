"""The one evaluator: the server simulator scores a placement (request -> server), whoever produced it.

Given the placement, servers do not interact, so each server replays its own requests in arrival order
(server.py) and the metrics are read off the finished requests:

* TTFT, TPOT, E2E and NTPOT = E2E / output tokens (the blog's normalised time per output token), P50/P90/P99 and
  means (ms; TPOT over requests with more than one output token);
* throughput = output tokens / (last completion - first arrival) (tokens/s);
* prefix hit rate = reused prompt tokens / prompt tokens;
* SLO attainment = share of requests meeting every given SLO (TTFT <= ``slo.ttft_ms``, TPOT <= ``slo.tpot_ms``);
* the same per QPS step of a load ladder.

The objective (schema.SolveSpec.objective) is the mean TTFT, or the mean TTFT excess over ``slo.ttft_ms``
``(1/n) sum_r max(0, TTFT_r - SLO)`` (ms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from optfleet.errors import InputError
from optfleet.problems.placement.engines import compiled_engine
from optfleet.problems.placement.server import Live, Server, make_server

if TYPE_CHECKING:
    from optfleet.problems.placement.problem import PlacementProblem

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Timeline:
    """Per-request outcome arrays (request order): server, reused prompt tokens, first token and completion (ms)."""

    server: np.ndarray
    hit_tokens: np.ndarray
    first_token_ms: np.ndarray
    done_ms: np.ndarray


@dataclass(frozen=True)
class Metrics:
    requests: int
    percentiles_ms: dict[str, dict[int, float | None]]
    means_ms: dict[str, float | None]
    throughput_tokens_per_s: float
    prefix_hit_rate: float
    slo_attainment: float | None


@dataclass(frozen=True)
class Evaluation:
    timeline: Timeline
    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    e2e_ms: np.ndarray
    ntpot_ms: np.ndarray
    overall: Metrics
    per_step: tuple[tuple[float, Metrics], ...] = ()
    objective_ms: float = 0.0
    ttft_excess_ms: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def live_request(problem: "PlacementProblem", i: int) -> Live:
    q = problem.requests
    total = problem.total_blocks[i]
    return Live(i, float(q.arrival_ms[i]), int(q.prompt_tokens[i]), int(q.output_tokens[i]), int(q.group[i]), int(q.session[i]),
                int(q.shared_tokens[i]), int(total))


def new_servers(problem: "PlacementProblem") -> list[Server]:
    return [make_server(engine, problem.block_tokens) for engine in problem.engines]


def checked_placement(placement: Any, n: int, k: int, field: str = "placement") -> np.ndarray:
    """``placement`` as an int64 array after checking it holds one server index in ``[0, k)`` for each of the ``n``
    requests: an InputError naming ``field`` otherwise (the entry at fault, or the length against ``n``).  An entry
    must be an integer itself: a boolean, a fraction, NaN, a string or a list is refused, never rounded."""
    what = f"a placement lists one server index in [0, {k}) per request"
    if isinstance(placement, np.ndarray) and placement.dtype.kind in "iu" and placement.ndim == 1:
        values, entries = placement, None  # an integer array (a method's plan): checked at numpy speed
    elif isinstance(placement, (list, tuple, np.ndarray)):
        entries = placement.tolist() if isinstance(placement, np.ndarray) else list(placement)
        values = None
    else:
        raise InputError(field, type(placement).__name__, what)
    length = len(entries) if entries is not None else int(values.shape[0])
    if length != n:
        raise InputError(field, _head(placement), f"has {length:,} entries; the instance has {n:,} requests ({what})")
    if entries is not None:
        for i, v in enumerate(entries):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < k:
                raise InputError(field, v, f"entry {i} is not a server index ({what})")
        return np.asarray(entries, dtype=np.int64)
    bad = np.flatnonzero((values < 0) | (values >= k))
    if bad.size:
        raise InputError(field, values[bad[0]].item(), f"entry {int(bad[0])} is not a server index ({what})")
    return values.astype(np.int64, copy=False)


def _head(placement: Any) -> Any:
    """The first entries of a placement, for a message."""
    return list(placement[:8]) if not isinstance(placement, np.ndarray) else placement[:8].tolist()


def replay(problem: "PlacementProblem", placement: np.ndarray, engine: str | None = None) -> Timeline:
    """Every server replays the requests placed on it (module docstring), compiled when ``engine`` allows
    (engines.py; the same timeline, bit for bit)."""
    n, k = len(problem.requests), len(problem.engines)
    placement = checked_placement(placement, n, k)
    compiled = compiled_engine(problem, engine)
    if compiled is not None:
        return _checked(Timeline(placement, *compiled.replay(problem, placement)))
    servers = new_servers(problem)
    for i in range(n):
        server = servers[placement[i]]
        r = live_request(problem, i)
        server.advance(r.arrival_ms)
        server.enqueue(r, r.arrival_ms)
    return timeline_of(problem, servers, placement)


def timeline_of(problem: "PlacementProblem", servers: list[Server], placement: np.ndarray) -> Timeline:
    """Drain the servers and collect every request's outcome."""
    n = len(problem.requests)
    hit, first, done = np.zeros(n, dtype=np.int64), np.full(n, np.nan), np.full(n, np.nan)
    for server in servers:
        server.drain()
        for r in server.finished:
            hit[r.index], first[r.index], done[r.index] = r.hit * problem.block_tokens, r.first_token_ms, r.done_ms
    return _checked(Timeline(np.asarray(placement, dtype=np.int64), hit, first, done))


def _checked(t: Timeline) -> Timeline:
    if np.isnan(t.done_ms).any():
        raise RuntimeError("the simulator left requests unfinished")  # cannot happen: admission always fits (problem.py)
    return t


def _percentiles(values: np.ndarray) -> dict[int, float | None]:
    if values.size == 0:
        return {p: None for p in PERCENTILES}
    return {p: float(v) for p, v in zip(PERCENTILES, np.percentile(values, PERCENTILES), strict=True)}


def metrics(problem: "PlacementProblem", t: Timeline, mask: np.ndarray) -> Metrics:
    """The module docstring's metrics over the requests in ``mask``."""
    q = problem.requests
    arrival, output, prompt = q.arrival_ms[mask], q.output_tokens[mask], q.prompt_tokens[mask]
    ttft, e2e = t.first_token_ms[mask] - arrival, t.done_ms[mask] - arrival
    multi = output > 1
    series = {"ttft": ttft, "tpot": (t.done_ms[mask] - t.first_token_ms[mask])[multi] / (output[multi] - 1), "e2e": e2e, "ntpot": e2e / output}
    span_s = (t.done_ms[mask].max() - arrival.min()) / 1000.0 if arrival.size else 0.0
    met = np.ones(arrival.size, dtype=bool)
    slo = problem.slo
    if slo.ttft_ms is not None:
        met &= ttft <= slo.ttft_ms
    if slo.tpot_ms is not None:
        tpot_all = np.where(multi, (t.done_ms[mask] - t.first_token_ms[mask]) / np.maximum(output - 1, 1), 0.0)
        met &= tpot_all <= slo.tpot_ms
    has_slo = slo.ttft_ms is not None or slo.tpot_ms is not None
    return Metrics(
        requests=int(arrival.size),
        percentiles_ms={name: _percentiles(v) for name, v in series.items()},
        means_ms={name: (float(v.mean()) if v.size else None) for name, v in series.items()},
        throughput_tokens_per_s=float(output.sum() / span_s) if span_s > 0 else 0.0,
        prefix_hit_rate=float(t.hit_tokens[mask].sum() / prompt.sum()) if prompt.size else 0.0,
        slo_attainment=(float(met.mean()) if arrival.size else None) if has_slo else None,
    )


def evaluate(problem: "PlacementProblem", placement: np.ndarray, engine: str | None = None) -> Evaluation:
    """Score ``placement`` with the simulator (module docstring; ``engine``: engines.py)."""
    return evaluation_of(problem, replay(problem, placement, engine))


def ttft_excess_ms(problem: "PlacementProblem", ttft: np.ndarray) -> float | None:
    """The mean TTFT excess over ``slo.ttft_ms``, ``(1/n) sum_r max(0, TTFT_r - SLO)`` (ms; None without the SLO)."""
    return None if problem.slo.ttft_ms is None else float(np.maximum(0.0, ttft - problem.slo.ttft_ms).mean())


def objective_of_ttft(problem: "PlacementProblem", ttft: np.ndarray) -> float:
    """The objective (module docstring) of the requests' TTFTs (ms)."""
    return ttft_excess_ms(problem, ttft) if problem.objective == "ttft_excess" else float(ttft.mean())


def evaluation_of(problem: "PlacementProblem", t: Timeline) -> Evaluation:
    q = problem.requests
    ttft, e2e = t.first_token_ms - q.arrival_ms, t.done_ms - q.arrival_ms
    tpot = np.where(q.output_tokens > 1, (t.done_ms - t.first_token_ms) / np.maximum(q.output_tokens - 1, 1), math.nan)
    everything = np.ones(len(q), dtype=bool)
    steps = ()
    if len(q.step_rates_rps) > 1:
        steps = tuple((rate, metrics(problem, t, q.step == i)) for i, rate in enumerate(q.step_rates_rps) if np.any(q.step == i))
    excess = ttft_excess_ms(problem, ttft)
    objective = objective_of_ttft(problem, ttft)
    return Evaluation(t, ttft, tpot, e2e, e2e / q.output_tokens, metrics(problem, t, everything), steps, objective, excess)
