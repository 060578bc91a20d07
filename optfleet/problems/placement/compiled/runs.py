"""The compiled runs' Python side: the arrays of every server's state (kernels.py's layout), online routing with the
oracle (:func:`route_oracle`, as policies.route), the replay of a fixed placement (:func:`replay`, as
evaluate.replay) and whether a problem fits the tables (:func:`fits`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np
from numba import types
from numba.typed import Dict

from optfleet.problems.placement.compiled.kernels import (
    ARRIVAL, BASE, BUDGET, CAPACITY, DONE, FINISHED_AT, FIRST, G_NEXT_FREE, GROUP, H_NEXT, HIT, LRU_NEW, LRU_OLD,
    O_NEXT_FREE, OUTPUT, PER_BLOCK, PER_PAIR, PER_SEQ, PER_TOKEN, PROMPT, Q_HEAD, Q_TAIL, SEATS, SESSION, SHARED, TOTAL, drain,
    replay_requests, route_requests)
from optfleet.progress import percent_chunks

if TYPE_CHECKING:
    from optfleet.problems.placement.policies import PredictedLatency
    from optfleet.problems.placement.problem import PlacementProblem

MAX_CELLS = 5_000_000  # servers x running slots beyond which the Python engine runs instead (the tables would take gigabytes)


def fits(problem: "PlacementProblem") -> bool:
    """Whether the compiled tables stay small: servers x running slots (each server's running requests and the
    forecast's copy of them) within :data:`MAX_CELLS` (a million-sequence engine runs in Python instead)."""
    return len(problem.engines) * (_width(problem) + 1) <= MAX_CELLS


def _width(problem: "PlacementProblem") -> int:
    return min(max(e.max_running_seqs for e in problem.engines), len(problem.requests)) + 1


class _State:
    """Every server's state in the arrays the compiled functions share (module docstring): requests' rows, servers'
    rows, the running table and the cache pools with their free lists, sized by what can be alive at once: origins
    by the blocks that can be present and by four creations per request (each publishes at most twice, in two
    origins), holder ends by two per running request, cached segments by the blocks present and two per release."""

    def __init__(self, problem: "PlacementProblem") -> None:
        q, engines = problem.requests, problem.engines
        n, k = len(q), len(engines)
        self.block = problem.block_tokens
        group, session = _dense(q.group), _dense(q.session)  # origin keys server * stride + 2 id + kind stay below n * k * 4
        self.stride = 2 * (int(max(group.max(initial=0), session.max(initial=0))) + 1)
        self.Q = np.zeros((n, 14), dtype=np.int64)
        self.Q[:, PROMPT], self.Q[:, OUTPUT], self.Q[:, GROUP] = q.prompt_tokens, q.output_tokens, group
        self.Q[:, SESSION], self.Q[:, SHARED], self.Q[:, TOTAL] = session, q.shared_tokens, problem.total_blocks
        self.QF = np.full((n, 3), np.nan)
        self.QF[:, ARRIVAL] = q.arrival_ms
        self.SI = np.zeros((k, 14), dtype=np.int64)
        self.SI[:, SEATS] = [e.max_running_seqs for e in engines]
        self.SI[:, CAPACITY] = [e.kv_capacity_blocks for e in engines]
        self.SI[:, BUDGET] = [e.prefill_budget_tokens for e in engines]
        self.SI[:, LRU_OLD] = self.SI[:, LRU_NEW] = self.SI[:, Q_HEAD] = self.SI[:, Q_TAIL] = -1
        self.SF = np.zeros((k, 8))
        for column, name in ((PER_TOKEN, "prefill_ms_per_token"), (BASE, "step_base_ms"), (PER_SEQ, "step_ms_per_seq"),
                             (PER_BLOCK, "step_ms_per_kv_block"), (PER_PAIR, "prefill_ms_per_pair")):
            self.SF[:, column] = [getattr(e, name) for e in engines]
        width = _width(problem)
        self.RUN = np.full((k, width), -1, dtype=np.int64)
        present = sum(e.kv_capacity_blocks for e in engines)
        self.O = _pool(min(present, 4 * n) + 2, 8, O_NEXT_FREE)
        self.H = _pool(2 * k * width + 2, 3, H_NEXT)
        self.G = _pool(min(present, 2 * n) + 2, 8, G_NEXT_FREE)
        self.free = np.zeros(4, dtype=np.int64)  # free-list heads of the three pools (slot 0 each), finished count
        self.F = np.zeros((width + 1, 7), dtype=np.int64)
        self.remaining, self.blocks = np.zeros(width + 1, dtype=np.int64), np.zeros(width + 1, dtype=np.int64)
        self.origins = Dict.empty(key_type=types.int64, value_type=types.int64)

    def server_args(self) -> tuple:
        return self.origins, self.Q, self.QF, self.SI, self.SF, self.RUN, self.O, self.H, self.G, self.free

    def drain(self) -> None:
        drain(*self.server_args(), self.block, self.stride)


def _dense(ids: np.ndarray) -> np.ndarray:
    """Ids renumbered 0, 1, ... in their order (-1, none, kept): only their equality matters to the caches, and a
    trace's ids may reach 2**53, where the origin keys would overflow int64."""
    dense = np.full(ids.shape, -1, dtype=np.int64)
    named = ids >= 0
    dense[named] = np.unique(ids[named], return_inverse=True)[1].ravel()
    return dense


def _pool(size: int, columns: int, next_column: int) -> np.ndarray:
    pool = np.full((size, columns), -1, dtype=np.int64)
    pool[:, next_column] = np.arange(1, size + 1)
    pool[-1, next_column] = -1
    return pool


def route_oracle(problem: "PlacementProblem", policy: "PredictedLatency", progress: Callable[[float], None] | None = None) -> np.ndarray:
    """policies.route for the predicted-latency scorer with the oracle, compiled; sets the policy's accuracy summary
    (predictor.Accuracy over the same requests in the same order) and draws its exploration numbers from its own
    generator, one per request."""
    state = _State(problem)
    n, k = len(problem.requests), len(problem.engines)
    slo = problem.slo
    settings = np.array([policy.ttft_weight, policy.tau, policy.max_penalty_ms, policy.buffer,
                         np.nan if slo.ttft_ms is None else slo.ttft_ms, np.nan if slo.tpot_ms is None else slo.tpot_ms])
    has_slo = np.array([slo.ttft_ms is not None, slo.tpot_ms is not None])
    draws = policy.rng.random(n)  # the same numbers as n calls of random(), one per decision
    placement = np.full(n, -1, dtype=np.int64)
    predicted = np.zeros((n, 2))
    scratch, members, tier = np.zeros((5, k)), np.zeros(k, dtype=np.int64), np.zeros(k, dtype=np.int64)
    for start, stop in percent_chunks(n, progress):
        route_requests(start, stop, *state.server_args(), state.F, state.remaining, state.blocks, state.block, state.stride, draws,
                       float(policy.explore), settings, has_slo, placement, predicted, scratch, members, tier)
    state.drain()
    policy.accuracy = _accuracy(problem, state, placement, predicted)
    return placement


def _accuracy(problem: "PlacementProblem", state: _State, placement: np.ndarray, predicted: np.ndarray) -> dict[str, Any]:
    """predictor.Accuracy.summary: MAPE over the servers in order, each server's requests in completion order."""
    order = np.lexsort((state.Q[:, FINISHED_AT], placement))
    output, arrival = problem.requests.output_tokens[order], problem.requests.arrival_ms[order]
    first, done = state.QF[order, FIRST], state.QF[order, DONE]
    ttft = first - arrival
    seen = ttft > 0  # an observed 0 has no percentage error (as in the reference)
    ttft_errors = np.abs(predicted[order, 0][seen] - ttft[seen]) / ttft[seen]
    multi = output > 1
    tpot = (done[multi] - first[multi]) / (output[multi] - 1)
    seen = tpot > 0
    tpot_errors = np.abs(predicted[order, 1][multi][seen] - tpot[seen]) / tpot[seen]
    return {"predicted_requests": int(order.size),
            "ttft_mape_pct": 100.0 * float(np.mean(ttft_errors)) if ttft_errors.size else None,
            "tpot_mape_pct": 100.0 * float(np.mean(tpot_errors)) if tpot_errors.size else None}


def replay(problem: "PlacementProblem", placement: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """evaluate.replay compiled: every request's reused prompt tokens, first token and completion (ms)."""
    state = _State(problem)
    replay_requests(0, len(placement), *state.server_args(), state.block, state.stride, np.ascontiguousarray(placement, dtype=np.int64))
    state.drain()
    return state.Q[:, HIT] * state.block, state.QF[:, FIRST].copy(), state.QF[:, DONE].copy()
