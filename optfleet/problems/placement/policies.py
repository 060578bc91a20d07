"""Routing policies (pluggable, registered): each places requests online, one at a time, seeing the servers' state.

A policy is a class with ``choose(cluster, i, t_ms) -> server``; :data:`POLICIES` maps a name to a factory
``(problem, params, field) -> policy`` and :func:`register_policy` adds one.  Registered:

* ``round_robin``: servers in turn (Kubernetes' default);
* ``least_requests``: fewest waiting + running requests (least connections);
* ``load_prefix`` (weights ``prefix``, ``queue``, ``kv``; presets ``load_prefix_111`` and ``load_prefix_322``):
  the llm-d / Gateway API Inference Extension weighted scorers, every score in [0, 1] and the server with the
  largest ``w_p * prefix + w_q * queue + w_kv * kv`` chosen, ties at random, where prefix = reused prompt blocks
  / prompt blocks, queue = ``(q_max - q) / (q_max - q_min)`` over the servers (1 when all are equal) and
  kv = ``1 - KV usage``;
* ``predicted_latency``: the blog's predicted-latency scorer (:class:`PredictedLatency`), with the ``oracle``
  predictor (forecast.py) or the online ``quantile`` regression (predictor.py).

Source: "Predicted-Latency Based Scheduling for LLMs", llm-d blog (Mitra, Braun, Gharaibeh, Coleman).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from optfleet.errors import InputError
from optfleet.problems.placement.engines import compiled_engine
from optfleet.problems.placement.evaluate import live_request, new_servers
from optfleet.problems.placement.forecast import OracleBoard, oracle_latency
from optfleet.problems.placement.predictor import Accuracy
from optfleet.problems.placement.server import Live, Server
from optfleet.progress import percent_chunks

if TYPE_CHECKING:
    from optfleet.problems.placement.problem import PlacementProblem


class Cluster:
    """The servers during an online run: ``at(k, t)`` is server ``k`` advanced to ``t`` (servers advance when a
    policy looks at them, so one that looks at a single server costs one server's work).  The cluster keeps each
    server's iteration end, so advancing every server touches only those with an iteration ending before ``t``,
    and each server's signals as of its ``version``, so :meth:`state` reads only the servers that changed.  It also
    keeps the servers each conversation and each group was placed on: a server's cache holds a block of origin
    ``(session, k)`` or ``(group, k)`` (cache.py) only if a request of that session or group ran there, so elsewhere
    a request reuses nothing and only those servers are asked (its group's only when its system prompt fills a block)."""

    def __init__(self, problem: "PlacementProblem") -> None:
        self.problem = problem
        self.servers: list[Server] = new_servers(problem)
        self.placement = np.full(len(problem.requests), -1, dtype=np.int64)
        k = len(self.servers)
        self._next_end = np.full(k, np.inf)  # each server's iteration end (inf: idle)
        self.versions = np.zeros(k, dtype=np.int64)  # each server's Server.version (servers change only through here)
        self._versions = np.full(k, -1, dtype=np.int64)
        self._signals = np.zeros((4, k))  # queue, running, KV usage, input tokens in flight, as of _versions
        self._placed: dict[tuple[str, int], set[int]] = {}  # ("s", session) or ("g", group) -> servers it was placed on

    def at(self, k: int, t_ms: float) -> Server:
        server = self.servers[k]
        server.advance(t_ms)
        self._next_end[k] = np.inf if server.iteration_end_ms is None else server.iteration_end_ms
        self.versions[k] = server.version
        return server

    def advance_all(self, t_ms: float) -> list[Server]:
        """Every server advanced to ``t_ms``."""
        for k in np.flatnonzero(self._next_end < t_ms).tolist():
            self.at(k, t_ms)
        return self.servers

    def dispatch(self, i: int, k: int, t_ms: float) -> None:
        server = self.at(k, t_ms)
        r = live_request(self.problem, i)
        server.enqueue(r, t_ms)
        self._next_end[k] = server.iteration_end_ms
        self.versions[k] = server.version
        self.placement[i] = k
        self._placed.setdefault(("s", r.session), set()).add(k)
        if r.group >= 0:
            self._placed.setdefault(("g", r.group), set()).add(k)

    def hits(self, r: Live) -> np.ndarray:
        """Blocks request ``r`` would reuse on each server (advanced): asked of the servers its session or group
        was placed on, 0 elsewhere (class docstring)."""
        hit = np.zeros(len(self.servers), dtype=np.int64)
        where = self._placed.get(("s", r.session), set())
        if r.group >= 0 and r.shared_tokens >= self.problem.block_tokens:  # a whole block of the system prompt
            where = where | self._placed.get(("g", r.group), set())
        for k in where:
            hit[k] = self.servers[k].cache.hit_blocks(r)
        return hit

    def state(self, i: int, t_ms: float) -> dict[str, np.ndarray]:
        """Every server's signals for request ``i`` at ``t_ms``: queue depth, running requests, KV usage, reused
        prompt blocks ``hit``, prefix score (reused prompt tokens / prompt tokens) and input tokens in flight."""
        r = live_request(self.problem, i)
        servers = self.advance_all(t_ms)
        for k in np.flatnonzero(self.versions != self._versions).tolist():
            s = servers[k]
            self._signals[:, k] = (s.queue_depth, len(s.running), s.kv_usage, s.input_tokens_in_flight)
        self._versions = self.versions.copy()
        hit = self.hits(r)
        queue, running, kv, in_flight = self._signals.copy()
        return {"queue": queue, "running": running, "kv": kv, "hit": hit, "prefix": hit * self.problem.block_tokens / r.prompt,
                "in_flight": in_flight}


class RoundRobin:
    def __init__(self) -> None:
        self.next = 0

    def choose(self, cluster: Cluster, i: int, t_ms: float) -> int:
        k = self.next
        self.next = (k + 1) % len(cluster.servers)
        return k


class LeastRequests:
    def choose(self, cluster: Cluster, i: int, t_ms: float) -> int:
        load = [s.queue_depth + len(s.running) for s in (cluster.at(k, t_ms) for k in range(len(cluster.servers)))]
        return int(np.argmin(load))


def queue_score(queue: np.ndarray) -> np.ndarray:
    """``(q_max - q) / (q_max - q_min)``, 1 everywhere when every queue is equal."""
    low, high = queue.min(), queue.max()
    return np.ones_like(queue) if high == low else (high - queue) / (high - low)


class LoadPrefix:
    """The weighted load+prefix scorer (module docstring)."""

    def __init__(self, prefix: float, queue: float, kv: float, seed: int) -> None:
        self.weights = (prefix, queue, kv)
        self.rng = np.random.default_rng(seed)

    def scores(self, state: dict[str, np.ndarray]) -> np.ndarray:
        w_prefix, w_queue, w_kv = self.weights
        return w_prefix * state["prefix"] + w_queue * queue_score(state["queue"]) + w_kv * (1.0 - state["kv"])

    def choose(self, cluster: Cluster, i: int, t_ms: float) -> int:
        score = self.scores(cluster.state(i, t_ms))
        best = np.flatnonzero(score >= score.max() - 1e-12)
        return int(best[0] if best.size == 1 else self.rng.choice(best))


def _normalise(values: np.ndarray) -> np.ndarray:
    """Min-max normalisation over the candidates (0 everywhere when they are all equal)."""
    low, high = values.min(), values.max()
    return np.zeros_like(values) if high == low else (values - low) / (high - low)


def pick_by_latency(ttft_ms: np.ndarray, tpot_ms: np.ndarray, idle: np.ndarray, slo_ttft_ms: float | None,
                    slo_tpot_ms: float | None, buffer: float, ttft_weight: float) -> int:
    """The predicted-latency scorer's choice among candidates (positions in the arrays), as the blog states it.

    With SLOs, headroom ``h = SLO * buffer - predicted`` for TTFT and TPOT (a missing SLO's headroom is left out
    and the other gets the whole weight).  Servers with every headroom >= 0: best fit, the least combined
    headroom ``w n(h_ttft) + (1 - w) n(h_tpot)`` (``n`` min-max over them, ``w = ttft_weight``).  None: in tiers,
    idle servers first (the lowest predicted latency among them), then TPOT-only negative, TTFT-only negative,
    both negative, each tier's largest combined headroom (the smallest deficit).  Without SLOs: the lowest
    combined predicted latency ``w n(TTFT) + (1 - w) n(TPOT)``.  Ties: the first candidate."""
    w_ttft, w_tpot = (ttft_weight, 1.0 - ttft_weight)
    if slo_ttft_ms is None and slo_tpot_ms is None:
        return int(np.argmin(w_ttft * _normalise(ttft_ms) + w_tpot * _normalise(tpot_ms)))
    h_ttft = slo_ttft_ms * buffer - ttft_ms if slo_ttft_ms is not None else np.zeros_like(ttft_ms)
    h_tpot = slo_tpot_ms * buffer - tpot_ms if slo_tpot_ms is not None else np.zeros_like(tpot_ms)
    if slo_ttft_ms is None:
        w_ttft, w_tpot = 0.0, 1.0
    elif slo_tpot_ms is None:
        w_ttft, w_tpot = 1.0, 0.0
    positive = np.flatnonzero((h_ttft >= 0) & (h_tpot >= 0))
    if positive.size:
        combined = w_ttft * _normalise(h_ttft[positive]) + w_tpot * _normalise(h_tpot[positive])
        return int(positive[np.argmin(combined)])
    idle_ones = np.flatnonzero(idle)
    if idle_ones.size:
        latency = w_ttft * _normalise(ttft_ms[idle_ones]) + w_tpot * _normalise(tpot_ms[idle_ones])
        return int(idle_ones[np.argmin(latency)])
    for tier in ((h_ttft >= 0) & (h_tpot < 0), (h_ttft < 0) & (h_tpot >= 0), (h_ttft < 0) & (h_tpot < 0)):
        members = np.flatnonzero(tier)
        if members.size:
            combined = w_ttft * _normalise(h_ttft[members]) + w_tpot * _normalise(h_tpot[members])
            return int(members[np.argmax(combined)])
    raise AssertionError("every candidate is in a tier")


def affinity_candidates(prefix: np.ndarray, ttft_ms: np.ndarray, tau: float, max_penalty_ms: float, explore: bool) -> np.ndarray:
    """The blog's epsilon-greedy affinity gate: unless exploring, only servers with prefix score >= ``tau``, if any,
    and unless the best of them predicts a TTFT more than ``max_penalty_ms`` above the best overall."""
    everyone = np.arange(prefix.size)
    if explore:
        return everyone
    sticky = np.flatnonzero(prefix >= tau)
    if sticky.size == 0 or ttft_ms[sticky].min() > ttft_ms.min() + max_penalty_ms:
        return everyone
    return sticky


class PredictedLatency:
    """The predicted-latency scorer (:func:`affinity_candidates`, then :func:`pick_by_latency`) over a predictor's
    TTFT and TPOT per server (``predict(cluster, i, t, state) -> (ttft, tpot)``); ``make_predictor()`` is called
    at the first decision (so checking an instance needs no learning library)."""

    def __init__(self, problem: "PlacementProblem", make_predictor: Callable[[], Any], *, ttft_weight: float = 0.8, affinity_tau: float = 0.80,
                 explore_probability: float = 0.01, affinity_max_ttft_penalty_ms: float = 5000.0, buffer: float | None = None,
                 seed: int = 0) -> None:
        self.problem, self.make_predictor, self.predictor = problem, make_predictor, None
        self.ttft_weight, self.tau, self.explore = ttft_weight, affinity_tau, explore_probability
        self.max_penalty_ms = affinity_max_ttft_penalty_ms
        self.buffer = problem.slo.buffer if buffer is None else buffer
        self.rng = np.random.default_rng(seed)

    def choose(self, cluster: Cluster, i: int, t_ms: float) -> int:
        if self.predictor is None:
            self.predictor = self.make_predictor()
        state = cluster.state(i, t_ms)
        ttft, tpot = self.predictor.predict(cluster, i, t_ms, state)
        candidates = affinity_candidates(state["prefix"], ttft, self.tau, self.max_penalty_ms, self.rng.random() < self.explore)
        idle = (state["queue"] == 0) & (state["running"] == 0)
        slo = self.problem.slo
        k = int(candidates[pick_by_latency(ttft[candidates], tpot[candidates], idle[candidates], slo.ttft_ms, slo.tpot_ms,
                                           self.buffer, self.ttft_weight)])
        self.predictor.chosen(cluster, i, t_ms, k, state, ttft[k], tpot[k])
        return k

    def finish(self, cluster: Cluster) -> None:
        self.accuracy = None if self.predictor is None else self.predictor.summary(cluster)

    def summary(self) -> dict[str, Any]:
        """The predictor's accuracy on the servers chosen (predictor.Accuracy)."""
        return self.accuracy


class OraclePredictor:
    """The simulator's own expected latency (forecast.py) on every server: by default the fast forward run
    (forecast.OracleBoard: snapshots kept per server state, numpy over the servers in the common case),
    ``exact=True`` the reference forward run on a copy of each server (the same numbers, bit for bit; slower)."""

    def __init__(self, exact: bool = False) -> None:
        self.accuracy = Accuracy()
        self.exact = exact
        self.board: OracleBoard | None = None

    def predict(self, cluster: Cluster, i: int, t_ms: float, state: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Every server's (TTFT, TPOT) for request ``i`` (``cluster.state`` advanced the servers to ``t_ms``)."""
        r = live_request(cluster.problem, i)
        if self.exact:
            ttft, tpot = zip(*(oracle_latency(cluster.at(k, t_ms), r, t_ms) for k in range(len(cluster.servers))), strict=True)
            return np.array(ttft), np.array(tpot)
        if self.board is None:
            self.board = OracleBoard(cluster.servers)
        return self.board.predict(t_ms, r.prompt, r.output, r.total_blocks, state["hit"], cluster.versions)

    def chosen(self, cluster: Cluster, i: int, t_ms: float, k: int, state: dict[str, np.ndarray], ttft_ms: float, tpot_ms: float) -> None:
        self.accuracy.record(i, ttft_ms, tpot_ms)  # the oracle learns nothing; its error is not knowing later arrivals

    def summary(self, cluster: Cluster) -> dict[str, Any]:
        return self.accuracy.summary(cluster)


def _load_prefix(problem: "PlacementProblem", params: dict[str, Any], field: str) -> LoadPrefix:
    weights = dict(params.get("weights") or {"prefix": 1.0, "queue": 1.0, "kv": 1.0})
    unknown = set(weights) - {"prefix", "queue", "kv"}
    if unknown:
        raise InputError(f"{field}.weights", weights, f"unknown scorer(s) {sorted(unknown)}; known: prefix, queue, kv")
    values = [float(weights.get(name, 0.0)) for name in ("prefix", "queue", "kv")]
    if any(v < 0 for v in values) or sum(values) <= 0:
        raise InputError(f"{field}.weights", weights, "the weights must be >= 0 and not all zero")
    return LoadPrefix(*values, seed=problem.seed)


def _predicted_latency(problem: "PlacementProblem", params: dict[str, Any], field: str) -> PredictedLatency:
    options = {k: v for k, v in params.items() if k not in ("predictor", "retrain_every", "per_bucket")}
    if params.get("predictor", "oracle") == "quantile":
        from optfleet.problems.placement.predictor import QuantilePredictor

        def make_predictor() -> Any:
            return QuantilePredictor(problem, retrain_every=params.get("retrain_every"), per_bucket=params.get("per_bucket"))
    else:
        make_predictor = OraclePredictor
    return PredictedLatency(problem, make_predictor, seed=problem.seed, **options)


Factory = Callable[["PlacementProblem", dict[str, Any], str], Any]

POLICIES: dict[str, Factory] = {
    "round_robin": lambda problem, params, field: RoundRobin(),
    "least_requests": lambda problem, params, field: LeastRequests(),
    "load_prefix": _load_prefix,
    "load_prefix_111": lambda problem, params, field: _load_prefix(problem, {"weights": {"prefix": 1, "queue": 1, "kv": 1}}, field),
    "load_prefix_322": lambda problem, params, field: _load_prefix(problem, {"weights": {"prefix": 3, "queue": 2, "kv": 2}}, field),
    "predicted_latency": _predicted_latency,
    "predicted_latency_quantile": lambda problem, params, field: _predicted_latency(problem, {**params, "predictor": "quantile"}, field),
}

PARAMETERS = {"load_prefix": {"weights"}, "predicted_latency": {"predictor", "ttft_weight", "affinity_tau", "explore_probability",
                                                                "affinity_max_ttft_penalty_ms", "buffer", "retrain_every", "per_bucket"}}
PARAMETERS["predicted_latency_quantile"] = PARAMETERS["predicted_latency"]


def register_policy(name: str, factory: Factory, parameters: set[str] | None = None) -> None:
    """Make ``name`` usable in instance files and ``--methods``."""
    POLICIES[name] = factory
    PARAMETERS[name] = set(parameters or ())


def make_policy(problem: "PlacementProblem", name: str, params: dict[str, Any], field: str) -> Any:
    """A fresh policy (policies keep per-run state); an InputError for an unknown name or a parameter it has not."""
    if name not in POLICIES:
        raise InputError(field, name, f"unknown policy; known: {', '.join(POLICIES)}")
    extra = set(params) - PARAMETERS.get(name, set())
    if extra:
        raise InputError(field, name, f"policy {name} takes no parameter(s) {sorted(extra)}")
    return POLICIES[name](problem, params, field)


def route(problem: "PlacementProblem", policy: Any, progress: Callable[[float], None] | None = None, engine: str | None = None) -> np.ndarray:
    """The placement ``policy`` makes online, request by request in arrival order; ``progress(share)`` (if given)
    hears the share of requests placed every 1 % of them.  The predicted-latency scorer with the oracle predictor
    runs compiled when ``engine`` allows (engines.py; the same placement and accuracy, bit for bit)."""
    if isinstance(policy, PredictedLatency) and policy.make_predictor is OraclePredictor:
        compiled = compiled_engine(problem, engine)
        if compiled is not None:
            return compiled.route_oracle(problem, policy, progress)
    cluster = Cluster(problem)
    arrival = problem.requests.arrival_ms
    for start, stop in percent_chunks(len(problem.requests), progress):
        for i in range(start, stop):
            t = float(arrival[i])
            cluster.dispatch(i, policy.choose(cluster, i, t), t)
    finish = getattr(policy, "finish", None)
    if finish is not None:
        finish(cluster)
    return cluster.placement
