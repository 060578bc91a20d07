"""Simulate a whole disaggregated pool at given counts: Poisson arrivals, replications, 95 % confidence intervals.

Replication ``r`` (seeds ``seed .. seed + R - 1``) draws ``N`` Poisson arrivals at ``rate_rps`` (exponential gaps),
each request's ``(L_in, L_out)`` from the workload's pairs (with their weights, or equally likely), and each
request's decode instance, then serves them (trace.py) and measures them (metrics.py).  Each figure is reported as
its mean over the replications and the 95 % Student-t half-width (fleet/simulate/run.py ``mean_ci95``; NaN for one
replication).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet import tables
from optfleet.errors import InputError
from optfleet.problems.fleet.simulate.run import check_run_size, mean_ci95
from optfleet.problems.pd_fleet.roles import DecodeRole, PrefillRole, TransferLink
from optfleet.problems.pd_fleet.simulate.metrics import measure
from optfleet.problems.pd_fleet.simulate.trace import simulate_requests
from optfleet.results import json_safe

MAX_POOL_REQUESTS = 15_000_000
"""Arrivals per replication at most: a replication holds every request's stage times and its decode runs at once,
about 270 bytes per request at the peak (measured: 1e6 requests of the benchmark's 70B pool), so 1.5 x 10^7 stay
near 4 GB, as the fleet simulator's limit (``check_run_size``, which also applies)."""

DEFAULT_WARMUP_SHARE = 0.1
"""The share of each run's first arrivals left out, as the fleet simulator's default (``simulate_plan``)."""


@dataclass(frozen=True)
class PoolSimulation:
    """A pool's simulated figures: ``{metric: (mean, 95 % half-width)}`` over ``reps`` replications of ``requests``
    arrivals (metrics.py names them), with the counts and the run's settings."""

    prefill_instances: int
    decode_instances: int
    rate_rps: float
    requests: int
    reps: int
    seed: int
    warmup_share: float
    ttft_target_ms: float | None
    tpot_target_ms: float | None
    metrics: dict[str, tuple[float, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The settings and ``metrics: {name: {mean, ci95}}`` (NaN as null)."""
        return json_safe({
            "prefill_instances": self.prefill_instances, "decode_instances": self.decode_instances, "rate_rps": self.rate_rps,
            "requests": self.requests, "reps": self.reps, "seed": self.seed, "warmup_share": self.warmup_share,
            "ttft_target_ms": self.ttft_target_ms, "tpot_target_ms": self.tpot_target_ms,
            "metrics": {name: {"mean": mean, "ci95": half} for name, (mean, half) in self.metrics.items()},
        })

    def text(self) -> str:
        """The report for people (optfleet.tables): the run, the latencies per stage, each role's busy share."""
        m = {name: mean for name, (mean, _) in self.metrics.items()}
        spread = "means over replications" if self.reps > 1 else "one replication"
        latencies = [{"figure": label, **{column: m.get(f"{stem}_{column}_ms") for column in LATENCY_STATISTICS},
                      "p99_ci95": self.metrics.get(f"{stem}_p99_ms", (None, None))[1]} for label, stem in LATENCY_ROWS]
        roles = [{"role": f"prefill x {self.prefill_instances}", "busy": m["prefill_busy_share"]},
                 {"role": f"links x {self.prefill_instances}", "busy": m["link_busy_share"]},
                 {"role": f"decode x {self.decode_instances}", "busy": m["decode_busy_share"],
                  "occupancy": m["decode_mean_occupancy"], "occupancy_share": m["decode_occupancy_share"]}]
        met = [f"{name} {100 * m[key]:.2f} %" for name, key in (("TTFT", "ttft_attainment"), ("TPOT", "tpot_attainment"),
                                                                 ("both", "attainment")) if key in m]
        targets = f"targets: TTFT {_target(self.ttft_target_ms)}, TPOT {_target(self.tpot_target_ms)}"
        return tables.page([
            f"{self.prefill_instances}P{self.decode_instances}D pool at {self.rate_rps:g} req/s: {self.requests:,} requests x {self.reps} "
            f"replication{'s' if self.reps != 1 else ''} (seed {self.seed}), the first {100 * self.warmup_share:g} % of arrivals left out; {spread}",
            tables.Table(LATENCY_COLUMNS, latencies),
            tables.Table(ROLE_COLUMNS, roles),
            *([f"attainment ({targets}): " + ", ".join(met)] if met else []),
        ])


LATENCY_ROWS = (("TTFT", "ttft"), ("TPOT", "tpot"), ("prefill wait", "prefill_wait"), ("link wait", "link_wait"),
                ("decode admission wait", "decode_wait"))
LATENCY_STATISTICS = ("mean", "p50", "p90", "p99")
LATENCY_COLUMNS = [
    tables.Column("figure", "figure", tables.text, tables.KEY),
    *(tables.Column(s, f"{s.upper() if s != 'mean' else 'mean'} ms", tables.number(4), tables.KEY) for s in LATENCY_STATISTICS),
    tables.Column("p99_ci95", "P99 95 % half-width ms", tables.number(2), tables.MEDIUM),
]
ROLE_COLUMNS = [
    tables.Column("role", "role", tables.text, tables.KEY), tables.Column("busy", "busy %", tables.percent(1), tables.KEY),
    tables.Column("occupancy", "mean running sequences", tables.number(4), tables.HIGH),
    tables.Column("occupancy_share", "of max batch %", tables.percent(1), tables.HIGH),
]


def simulate_pool(prefill: PrefillRole, link: TransferLink, decode: DecodeRole, *, rate_rps: float, l_in_tokens: ArrayLike,
                  l_out_tokens: ArrayLike, weights: ArrayLike | None = None, requests: int = 60_000, reps: int = 3, seed: int = 0,
                  warmup_share: float = DEFAULT_WARMUP_SHARE, ttft_target_ms: float | None = None,
                  tpot_target_ms: float | None = None, progress: Callable[[int, int], None] | None = None) -> PoolSimulation:
    """Simulate the pool of ``prefill.instances`` prefill and ``decode.instances`` decode instances at ``rate_rps``
    (module docstring); the workload is the pairs ``(l_in_tokens[j], l_out_tokens[j])`` with probabilities
    ``weights`` (default equal).  ``progress(done, reps)`` is called after each replication.

    Example: a 2P4D pool of an affine engine at 6 requests/s, prompts of 1,000 or 3,000 tokens:

    >>> from optfleet.engine import AffineStep
    >>> engine = AffineStep(base_ms=8.0, per_seq_ms=0.05, per_kv_token_ms=2e-4, per_prefill_token_ms=0.02, per_prefill_pair_ms=1e-7)
    >>> result = simulate_pool(PrefillRole(2, engine, 2048), TransferLink(gb_per_s=25.0, kv_bytes_per_token=160e3),
    ...                        DecodeRole(4, engine, 64), rate_rps=6.0, l_in_tokens=[1000, 3000], l_out_tokens=[200, 400],
    ...                        requests=2_000, reps=2, ttft_target_ms=500.0, tpot_target_ms=25.0)
    >>> sorted(name for name in result.metrics if name.startswith("ttft"))
    ['ttft_attainment', 'ttft_mean_ms', 'ttft_p50_ms', 'ttft_p90_ms', 'ttft_p99_ms']
    >>> bool(result.metrics["ttft_p99_ms"][0] > result.metrics["ttft_p50_ms"][0] > 0)
    True
    """
    check_run_size(requests, reps)
    if requests > MAX_POOL_REQUESTS:
        raise InputError("requests", requests, f"above the limit of {MAX_POOL_REQUESTS:,} requests per replication of a "
                         "disaggregated pool (about 270 bytes each at the peak: 4 GB); use more replications instead")
    prompts, outputs, probabilities = _checked_workload(l_in_tokens, l_out_tokens, weights)
    if not (math.isfinite(rate_rps) and rate_rps > 0):
        raise InputError("rate_rps", rate_rps, "must be a finite arrival rate > 0 requests/s")
    if not 0 <= warmup_share < 1:
        raise InputError("warmup_share", warmup_share, "must be in [0, 1)")
    for name, target in (("ttft_target_ms", ttft_target_ms), ("tpot_target_ms", tpot_target_ms)):
        if target is not None and not (math.isfinite(target) and target > 0):
            raise InputError(name, target, "must be a finite time > 0 ms")
    samples: dict[str, list[float]] = {}
    for rep in range(reps):
        rng = np.random.default_rng(seed + rep)
        arrival = np.cumsum(rng.exponential(1.0 / rate_rps, size=requests))
        pick = rng.choice(len(prompts), size=requests, p=probabilities)
        trace = simulate_requests(arrival, prompts[pick], outputs[pick], prefill, link, decode, rng)
        figures = measure(trace, prefill, decode, warmup_share=warmup_share, ttft_target_ms=ttft_target_ms,
                          tpot_target_ms=tpot_target_ms)
        for name, value in figures.items():
            samples.setdefault(name, []).append(value)
        if progress is not None:
            progress(rep + 1, reps)
    metrics = {name: mean_ci95(values) for name, values in samples.items()}
    return PoolSimulation(prefill.instances, decode.instances, float(rate_rps), requests, reps, seed, warmup_share,
                          ttft_target_ms, tpot_target_ms, metrics)


def _checked_workload(l_in_tokens: ArrayLike, l_out_tokens: ArrayLike,
                      weights: ArrayLike | None) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64] | None]:
    """The workload's pairs and probabilities, or an error naming the first bad field."""
    lengths = []
    for name, values in (("l_in_tokens", l_in_tokens), ("l_out_tokens", l_out_tokens)):
        raw = np.asarray(values)
        if raw.ndim != 1 or len(raw) == 0 or not np.issubdtype(raw.dtype, np.integer) or raw.min() < 1:
            raise InputError(name, values, "must be a non-empty list of integer token counts >= 1")
        lengths.append(raw.astype(np.int64))
    if len(lengths[0]) != len(lengths[1]):
        raise InputError("l_out_tokens", l_out_tokens, f"must pair with l_in_tokens: {len(lengths[1])} values for {len(lengths[0])}")
    if weights is None:
        return lengths[0], lengths[1], None
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != lengths[0].shape or not np.all(np.isfinite(w)) or w.min() < 0 or w.sum() <= 0:
        raise InputError("weights", weights, f"must be {len(w)} finite weights >= 0, one per pair, not all 0")
    return lengths[0], lengths[1], w / w.sum()


def _target(target_ms: float | None) -> str:
    return "none" if target_ms is None else f"{target_ms:g} ms"
