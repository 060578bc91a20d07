"""The batching simulator under the engine model against an iteration-by-iteration reference.

The simulator advances a GPU by runs of iterations whose lengths grow linearly (simulate/batching.py); the
reference below plays every iteration one at a time with the engine's step function, on one GPU, with the same
rules (admission at arrival into a free slot, joining at the next iteration boundary or the one starting then, a
FCFS prefill budget, a first token at the end of the first decode iteration).  They must agree to rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.engine.step import AffineStep, prefill_pairs
from optfleet.problems.fleet.pool_config import PoolConfig
from optfleet.problems.fleet.simulate.batching import simulate_batching

pytestmark = pytest.mark.unit


def reference(step: AffineStep, slots: int, chunk: int, arrival: np.ndarray, l_in: np.ndarray, l_out: np.ndarray):
    """One GPU, one iteration at a time (module docstring); times in seconds."""
    n = len(arrival)
    start, first, finish = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    pending = list(range(n))  # not yet admitted, in arrival order
    batch: list[list] = []  # [r, prefill left, decode left, context]
    joining: list[int] = []
    now = 0.0

    def admit(until: float, free: int) -> int:
        """Admit, in order, the requests that arrived by ``until`` while a slot is free (at their arrival, or now)."""
        while pending and free > 0 and arrival[pending[0]] <= until:
            r = pending.pop(0)
            start[r] = max(arrival[r], now)
            joining.append(r)
            free -= 1
        return free

    while pending or batch or joining:
        if not batch and not joining:
            now = max(now, arrival[pending[0]])
        admit(now, slots - len(batch) - len(joining))
        batch += [[r, int(l_in[r]), max(int(l_out[r]), 1), int(l_in[r])] for r in joining]
        joining = []
        decoding = [e for e in batch if e[1] == 0]
        budget, tokens, pairs = chunk, 0, 0.0
        for e in batch:
            if e[1] > 0 and budget > 0:
                used = min(budget, e[1])
                pairs += float(prefill_pairs(used, l_in[e[0]] - e[1]))
                tokens += used
                budget -= used
                e.append(used)
        length_ms = (step.base_ms + step.per_seq_ms * len(decoding) + step.per_kv_token_ms * sum(e[3] for e in decoding)
                     + step.per_prefill_token_ms * tokens + step.per_prefill_pair_ms * pairs)
        end = now + length_ms / 1000.0
        admit(np.nextafter(end, -np.inf), slots - len(batch))  # arrivals during the iteration, into free slots
        for e in decoding:
            if np.isnan(first[e[0]]):
                first[e[0]] = end
            e[2] -= 1
            e[3] += 1
            if e[2] == 0:
                finish[e[0]] = end
        for e in batch:
            if len(e) == 5:
                e[1] -= e.pop()
        batch = [e for e in batch if not (e[1] == 0 and e[2] == 0)]
        now = end
    return start, first, finish


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), slots=st.integers(1, 6), chunk=st.integers(16, 700), count=st.integers(1, 30),
       rate=st.floats(1.0, 200.0), pair_cost=st.sampled_from([0.0, 1e-5]), kv_cost=st.sampled_from([0.0, 2e-4]))
def test_the_run_simulator_equals_the_iteration_reference(seed, slots, chunk, count, rate, pair_cost, kv_cost):
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1.0 / rate, count))
    l_in = rng.integers(1, 2000, count)
    l_out = rng.integers(1, 60, count)
    step = AffineStep(5.0, 0.3, kv_cost, 0.02, pair_cost)
    config = PoolConfig(window_tokens=4096, slots_per_instance=slots, w_ms=5.0, h_ms_per_slot=0.3, chunk_tokens=chunk,
                        length_scale_tokens=None, cost_per_instance_hour=1.0, gpu="test", step=step)
    got = simulate_batching(config, 1, arrival, l_in, l_out)
    want = reference(step, slots, chunk, arrival, l_in, l_out)
    for name, ours, theirs in zip(("start", "first token", "finish"), (got.start_s, got.first_token_s, got.finish_s), want):
        assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-9), name


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31), slots=st.integers(1, 8), chunk=st.integers(16, 2048), rate=st.floats(5.0, 500.0))
def test_no_request_decodes_slower_than_the_slot_models_tpot_bound(seed, slots, chunk, rate):
    """The slot model bounds every TPOT percentile by its longest iteration (pool_config.py): in the simulation no
    request's time per output token exceeds it, however loaded the GPU."""
    rng = np.random.default_rng(seed)
    count, window = 300, 4096
    arrival = np.cumsum(rng.exponential(1.0 / rate, count))
    l_out = rng.integers(2, 200, count)
    l_in = rng.integers(1, window - l_out + 1)
    step = AffineStep(5.0, 0.3, 2e-4, 0.02, 1e-5)
    config = PoolConfig(window_tokens=window, slots_per_instance=slots, w_ms=5.0, h_ms_per_slot=0.3, chunk_tokens=chunk,
                        length_scale_tokens=None, cost_per_instance_hour=1.0, gpu="test", step=step)
    times = simulate_batching(config, 1, arrival, l_in, l_out)
    tpot_ms = 1000.0 * (times.finish_s - times.first_token_s) / (l_out - 1)
    assert tpot_ms.max() <= config.tpot_bound_ms * (1 + 1e-9)
