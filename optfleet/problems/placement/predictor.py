"""The learned predictor of the predicted-latency scorer: quantile regression (p90) of TTFT and TPOT, retrained
online on a stratified sliding window, as the llm-d blog describes (which uses XGBoost; here scikit-learn's
histogram gradient boosting with the quantile loss, in the optional ``placement`` extra).

* Features, per candidate server at dispatch: KV usage, input length (prompt tokens), queue depth, running
  requests, prefix score (reused prompt tokens / prompt tokens) and input tokens in flight (prompt tokens of the
  requests waiting or running there).
* Samples: a request's features on the server it was sent to, and the TTFT and TPOT it then saw, collected when
  it completes (requests with one output token have no TPOT).
* Window: buckets of queue depth (0, 1, 2-3, 4-7, 8+) x KV usage (tenths) x prefix score (quarters), the newest
  ``per_bucket`` samples in each, so regimes the latest traffic does not visit are not forgotten.
* Retraining: every ``retrain_every`` completions (two models, TTFT and TPOT, each the 0.9 quantile), fitted to
  ``log(1 + y)`` and mapped back (a quantile commutes with a monotone map, and the log tames TTFT's heavy tail:
  on scenario A the mean TTFT of the routing fell from 1,673 to 114 ms against fitting ``y``), leaves of at least
  5 samples (the windows are small).  Until the first fit the predictor ranks servers by load (TTFT: waiting +
  running requests; TPOT: running).
* Accuracy: MAPE ``100 mean |predicted - observed| / observed`` over the requests placed with a fitted model (the
  prediction for the chosen server).  The models predict the 90th percentile, so they sit above most
  observations by design; the blog's ~5 % MAPE is its own production figure, not comparable one to one.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np

from optfleet.errors import InputError

if TYPE_CHECKING:
    from optfleet.problems.placement.policies import Cluster
    from optfleet.problems.placement.problem import PlacementProblem

FEATURES = ("kv", "input_tokens", "queue", "running", "prefix", "in_flight")
QUEUE_EDGES = (1, 2, 4, 8)
QUANTILE = 0.9


def _require_sklearn():
    try:
        from sklearn.ensemble import HistGradientBoostingRegressor
    except ImportError as exc:
        raise InputError("policies", "predicted_latency_quantile",
                         "the quantile predictor needs scikit-learn: pip install 'optfleet[placement]'") from exc
    return HistGradientBoostingRegressor


def bucket(queue: float, kv: float, prefix: float) -> tuple[int, int, int]:
    """The stratum of a sample: queue-depth class, KV tenth, prefix quarter."""
    return int(np.searchsorted(QUEUE_EDGES, queue, side="right")), min(9, int(kv * 10)), min(3, int(prefix * 4))


class StratifiedWindow:
    """The newest ``per_bucket`` samples of every stratum."""

    def __init__(self, per_bucket: int) -> None:
        self.per_bucket = per_bucket
        self.buckets: dict[tuple[int, int, int], deque] = {}

    def add(self, x: np.ndarray, ttft_ms: float, tpot_ms: float | None) -> None:
        key = bucket(x[2], x[0], x[4])
        self.buckets.setdefault(key, deque(maxlen=self.per_bucket)).append((x, ttft_ms, tpot_ms))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        rows = [s for d in self.buckets.values() for s in d]
        x = np.array([s[0] for s in rows])
        ttft = np.array([s[1] for s in rows])
        has_tpot = np.array([s[2] is not None for s in rows])
        tpot = np.array([s[2] if s[2] is not None else 0.0 for s in rows])
        return x, ttft, tpot, has_tpot

    def __len__(self) -> int:
        return sum(len(d) for d in self.buckets.values())


class Accuracy:
    """A predictor's predictions for the servers chosen, against what the requests then saw (MAPE, module docstring)."""

    def __init__(self) -> None:
        self.predicted: dict[int, tuple[float, float]] = {}

    def record(self, i: int, ttft_ms: float, tpot_ms: float) -> None:
        self.predicted[i] = (float(ttft_ms), float(tpot_ms))

    def summary(self, cluster: "Cluster") -> dict[str, Any]:
        """MAPE of TTFT and TPOT over the recorded requests (the servers are drained first)."""
        ttft_errors, tpot_errors = [], []
        for server in cluster.servers:
            server.drain()
            for r in server.finished:
                if r.index not in self.predicted:
                    continue
                ttft_p, tpot_p = self.predicted[r.index]
                ttft = r.first_token_ms - r.arrival_ms
                ttft_errors.append(abs(ttft_p - ttft) / ttft)
                if r.output > 1:
                    tpot = (r.done_ms - r.first_token_ms) / (r.output - 1)
                    tpot_errors.append(abs(tpot_p - tpot) / tpot)
        return {"predicted_requests": len(ttft_errors),
                "ttft_mape_pct": 100.0 * float(np.mean(ttft_errors)) if ttft_errors else None,
                "tpot_mape_pct": 100.0 * float(np.mean(tpot_errors)) if tpot_errors else None}


class QuantilePredictor:
    """The online quantile-regression predictor (module docstring)."""

    def __init__(self, problem: "PlacementProblem", retrain_every: int | None = None, per_bucket: int | None = None,
                 min_samples: int = 30) -> None:
        self.model_class = _require_sklearn()
        self.problem = problem
        self.retrain_every = retrain_every or 25
        self.window = StratifiedWindow(per_bucket or 64)
        self.min_samples = min_samples
        self.models: tuple[Any, Any] | None = None
        self.fits = 0
        self._since_fit = 0
        self._seen: list[int] = []
        self._dispatched: dict[int, np.ndarray] = {}
        self.accuracy = Accuracy()

    @staticmethod
    def features(state: dict[str, np.ndarray], prompt_tokens: int) -> np.ndarray:
        return np.column_stack([state["kv"], np.full(state["kv"].shape, float(prompt_tokens)), state["queue"], state["running"],
                                state["prefix"], state["in_flight"]])

    def predict(self, cluster: "Cluster", i: int, t_ms: float, state: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        self._collect(cluster)
        if self.models is None:
            return state["queue"] + state["running"], state["running"].copy()
        x = self.features(state, int(self.problem.requests.prompt_tokens[i]))
        return np.expm1(self.models[0].predict(x)), np.expm1(self.models[1].predict(x))

    def chosen(self, cluster: "Cluster", i: int, t_ms: float, k: int, state: dict[str, np.ndarray], ttft_ms: float, tpot_ms: float) -> None:
        self._dispatched[i] = self.features(state, int(self.problem.requests.prompt_tokens[i]))[k]
        if self.models is not None:
            self.accuracy.record(i, ttft_ms, tpot_ms)

    def summary(self, cluster: "Cluster") -> dict[str, Any]:
        return {"predictor_fits": self.fits, **self.accuracy.summary(cluster)}

    def _collect(self, cluster: "Cluster") -> None:
        if not self._seen:
            self._seen = [0] * len(cluster.servers)
        for k, server in enumerate(cluster.servers):
            for r in server.finished[self._seen[k]:]:
                tpot = (r.done_ms - r.first_token_ms) / (r.output - 1) if r.output > 1 else None
                self.window.add(self._dispatched.pop(r.index), r.first_token_ms - r.arrival_ms, tpot)
                self._since_fit += 1
            self._seen[k] = len(server.finished)
        if self._since_fit >= self.retrain_every and len(self.window) >= self.min_samples:
            self._fit()

    def _fit(self) -> None:
        x, ttft, tpot, has_tpot = self.window.arrays()
        settings = {"loss": "quantile", "quantile": QUANTILE, "max_iter": 100, "min_samples_leaf": 5, "random_state": 0}
        ttft_model = self.model_class(**settings).fit(x, np.log1p(ttft))
        tpot_model = self.model_class(**settings).fit(x[has_tpot], np.log1p(tpot[has_tpot])) if has_tpot.sum() >= 2 else None
        if tpot_model is None:
            return
        self.models = (ttft_model, tpot_model)
        self.fits += 1
        self._since_fit = 0
