"""Prefix-tree caching: trace readers and their bad input, radix semantics, policies against a plain reference,
tree constraints in every schedule, the one-pass LRU curve, and the hindsight MILP against brute force."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optfleet.errors import InputError
from optfleet.problems.caching.evaluate import TtftModel
from optfleet.problems.prefix_cache.curve import stack_distances
from optfleet.problems.prefix_cache.evaluate import evaluate_schedule, fcfs_wait_ms
from optfleet.problems.prefix_cache.hindsight import lp_bound, objective_value, solve_hindsight
from optfleet.problems.prefix_cache.policies import POLICIES, TLRU, continuation, reused_depth
from optfleet.problems.prefix_cache.readers import read_block_trace
from optfleet.problems.prefix_cache.replay import replay
from optfleet.problems.prefix_cache.trace import BlockTrace, build_block_trace

from support import REPO

SAMPLE = REPO / "instances" / "prefix_cache" / "mooncake_conversation_sample.jsonl"
UNIT_TTFT = TtftModel(1.0)
TLRU_FAMILY = ("t-lru", "end-aware-t-lru", "length-aware-t-lru")  # the policies with a Q_hat
BLOCK = 4


def _trace(parents: list[int], requests: list[tuple[int, int, int]]) -> BlockTrace:
    """Requests (time step, node, tokens cut from the last block) over the forest ``parents`` (parent index < own)."""
    paths, inputs, times, t = [], [], [], 0.0
    for step, node, cut in requests:
        path = []
        node %= len(parents)
        while node >= 0:
            path.append(node)
            node = parents[node]
        path.reverse()
        t += step
        paths.append(path)
        inputs.append(len(path) * BLOCK - cut % BLOCK)
        times.append(t)
    return build_block_trace(times, inputs, [1] * len(paths), paths, BLOCK)


forest = st.integers(1, 9).flatmap(lambda n: st.tuples(*[st.integers(-1, i - 1) for i in range(n)]))
requests = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 50), st.integers(0, 3)), min_size=1, max_size=14)


# ---------------------------------------------------------------- readers and bad input

def _write(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _mooncake(t: int, n_tokens: int, hashes: list[int]) -> dict:
    return {"timestamp": t, "input_length": n_tokens, "output_length": 5, "hash_ids": hashes}


def test_mooncake_sample_reads_with_512_token_blocks():
    trace = read_block_trace(SAMPLE, "mooncake")
    assert trace.block_tokens == 512 and len(trace) == 36
    assert np.all(np.diff(trace.path_start) == -(-trace.input_tokens // 512))
    assert trace.occ_tokens.sum() == trace.input_tokens.sum()  # the last block of a path holds the remainder
    assert trace.arrival_s[-1] < 3600  # milliseconds read as seconds: the trace is one hour


def test_bailian_and_generic_formats(tmp_path):
    bailian = [{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 20, "output_length": 3, "type": "text", "turn": 1,
                "hash_ids": [7, 8]},
               {"chat_id": 2, "parent_chat_id": 1, "timestamp": 1.5, "input_length": 40, "output_length": 3, "type": "text", "turn": 2,
                "hash_ids": [7, 8, 9]}]
    trace = read_block_trace(_write(tmp_path, bailian), "bailian")
    assert trace.block_tokens == 16 and trace.arrival_s.tolist() == [0.5, 1.5] and trace.occ_tokens.tolist() == [16, 4, 16, 16, 8]
    generic = [{"arrival_s": 0, "input_tokens": 3, "output_tokens": 1, "block_hashes": ["a", "b"]}]
    assert read_block_trace(_write(tmp_path, generic), "generic", block_tokens=2).n_blocks == 2
    with pytest.raises(InputError, match="block_tokens"):
        read_block_trace(_write(tmp_path, generic), "generic")
    bailian[1]["parent_chat_id"] = 5
    with pytest.raises(InputError, match="parent_chat_id = 5: line 2"):
        read_block_trace(_write(tmp_path, bailian), "bailian")


@pytest.mark.parametrize(("rows", "block_tokens", "message"), [
    ([_mooncake(0, 600, [1, 2]), _mooncake(1, 600, [3, 2])], None, r"trace.hash_ids = 2: line 2: .*two different parents"),
    ([_mooncake(0, 1100, [1, 2, 1])], None, r"trace.hash_ids = 1: line 1: .*two different parents"),
    ([_mooncake(5, 600, [1, 2]), _mooncake(4, 600, [1, 2])], None, r"trace.timestamp = 4: line 2: arrival times must not decrease"),
    ([_mooncake(0, 600, [1, 2])], 0, r"trace.block_tokens = 0"),
    ([_mooncake(0, 600, [1, 2])], 16, r"trace.block_tokens = 16: mooncake traces have 512-token blocks"),
    ([_mooncake(0, 600, [1])], None, r"trace.hash_ids = 1: line 1: 1 blocks, but input_length 600 needs ceil\(600 / 512\) = 2"),
    ([], None, r"the trace is empty"),
    ([_mooncake(0, -3, [])], None, r"trace.input_length = -3: line 1"),
])
def test_bad_traces_name_field_and_line(tmp_path, rows, block_tokens, message):
    fmt = "generic" if block_tokens == 0 else "mooncake"
    if fmt == "generic":
        rows = [{"arrival_s": r["timestamp"], "input_tokens": r["input_length"], "output_tokens": 1, "block_hashes": r["hash_ids"]} for r in rows]
    with pytest.raises(InputError, match=message):
        read_block_trace(_write(tmp_path, rows), fmt, block_tokens=block_tokens)


# ---------------------------------------------------------------- semantics on a hand-worked tree

def test_hit_is_the_longest_resident_prefix_and_leaves_go_first():
    """Tree 0 -> 1 -> 2 and 0 -> 3.  Capacity 3.  Requests: [0,1,2], [0,3], [0,1].
    After request 1 the cache holds {0, 1, 2}; request 2 must evict for block 3: LRU takes the leaf 2 (stamp order
    deepest first), so request 3 hits 0 and 1 (two blocks).  Leaf-LRU frees the node {2, 1} (1's only child is 2),
    so request 3 hits only block 0."""
    trace = _trace([-1, 0, 1, 0], [(0, 2, 0), (1, 3, 0), (1, 1, 0)])
    lru = evaluate_schedule(trace, replay(trace, POLICIES["lru"](), 3).kept, 3, "leaves", UNIT_TTFT, 0.0)
    leaf = evaluate_schedule(trace, replay(trace, POLICIES["leaf-lru"](), 3).kept, 3, "leaves", UNIT_TTFT, 0.0)
    assert lru.hit_blocks.tolist() == [0, 1, 2]
    assert leaf.hit_blocks.tolist() == [0, 1, 1]


def test_reuse_needs_every_ancestor_under_any_eviction():
    """Path [0, 1] twice; a schedule that keeps block 1 through the gap but not its parent block 0.  Under ``any``
    that is allowed, and the second request still hits nothing (its first block is missing); under ``leaves`` the
    evaluator refuses the schedule."""
    trace = _trace([-1, 0], [(0, 1, 0), (1, 1, 0)])
    kept = np.zeros(len(trace.occ_block), dtype=bool)
    kept[1] = True  # block 1 kept through the gap, its parent block 0 not
    any_hits = evaluate_schedule(trace, kept, 2, "any", UNIT_TTFT, 0.0).hit_blocks
    assert any_hits.tolist() == [0, 0]
    with pytest.raises(ValueError, match="parent is evicted"):
        evaluate_schedule(trace, kept, 2, "leaves", UNIT_TTFT, 0.0)


# ---------------------------------------------------------------- policies against a plain reference

def _reference_replay(trace: BlockTrace, policy, capacity: int, eviction: str) -> list[frozenset[int]]:
    """The policy by definition: scan every candidate for the smallest key (no heap, no lazy entries)."""
    policy.bind(type("C", (), {"trace": trace, "capacity_blocks": capacity, "eviction": eviction, "ttft": UNIT_TTFT, "xi_ms": 2.0})())
    parent = trace.block_parent.tolist()
    resident: set[int] = set()
    key: dict[int, tuple] = {}
    states, stamp = [], 0
    for r in range(len(trace)):
        path = trace.path(r).tolist()
        for b in path:
            if b in resident:
                continue
            if len(resident) >= capacity:
                candidates = [c for c in resident if c not in path and (eviction == "any" or all(parent[d] != c for d in resident))]
                if not candidates:
                    break
                victim = min(candidates, key=lambda c: key[c])
                resident.discard(victim)
                p = parent[victim]
                while policy.evicts_node and p >= 0 and p in resident and p not in path and all(parent[d] != p for d in resident):
                    resident.discard(p)
                    p = parent[p]
            resident.add(b)
        first = int(trace.path_start[r])
        for k in range(len(path) - 1, -1, -1):
            stamp += 1
            new_key = policy.key(path[k], first + k, stamp)
            if path[k] in resident:
                key[path[k]] = new_key
        states.append(frozenset(resident))
    return states


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parents=forest, reqs=requests, capacity=st.integers(0, 8), eviction=st.sampled_from(["leaves", "any"]))
def test_every_policy_matches_its_reference_and_keeps_the_tree(parents, reqs, capacity, eviction):
    trace = _trace(list(parents), reqs)
    for name, make in POLICIES.items():
        kw = {"q_hat_tokens": 3.0} if name in TLRU_FAMILY else {}
        run = replay(trace, make(**kw), capacity, eviction, UNIT_TTFT, 2.0, record_states=True)
        assert list(run.states) == _reference_replay(trace, make(**kw), capacity, eviction), name
        for state in run.states:  # the tree constraints hold after every event
            assert len(state) <= capacity
            if eviction == "leaves":
                assert all(trace.block_parent[b] < 0 or trace.block_parent[b] in state for b in state), name
        evaluate_schedule(trace, run.kept, capacity, eviction, UNIT_TTFT, 2.0, policy=name)  # raises on any violation


# ---------------------------------------------------------------- the FCFS prefill server and pinning

def _fcfs_by_events(arrival_s, prefill_ms) -> tuple[list[float], list[float]]:
    """Start and finish (ms) of each request at one FCFS server, by stepping through the requests."""
    starts, finishes, free = [], [], 0.0
    for a, s in zip((1000.0 * np.asarray(arrival_s)).tolist(), prefill_ms, strict=True):
        starts.append(max(a, free))
        free = starts[-1] + s
        finishes.append(free)
    return starts, finishes


@settings(max_examples=60, deadline=None)
@given(gaps=st.lists(st.floats(0, 5), min_size=1, max_size=30), prefill=st.lists(st.floats(0, 4000), min_size=30, max_size=30))
def test_fcfs_waits_are_the_event_simulations(gaps, prefill):
    arrival_s = np.cumsum(gaps)
    service = np.asarray(prefill[:len(gaps)])
    starts, _ = _fcfs_by_events(arrival_s, service.tolist())
    np.testing.assert_allclose(fcfs_wait_ms(arrival_s, service), np.asarray(starts) - 1000.0 * arrival_s, atol=1e-6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parents=forest, reqs=requests, capacity=st.integers(0, 8), eviction=st.sampled_from(["leaves", "any"]))
def test_no_pinned_block_is_evicted_and_the_server_only_adds_waits(parents, reqs, capacity, eviction):
    """Times from an event simulation of the server (100 ms a token: requests queue): at each eviction, made when
    request r starts, the pinned blocks are the paths of every request whose prefill has started and not ended; none is
    evicted.  The schedule is the instantaneous one, and each TTFT is its wait plus the instantaneous TTFT."""
    trace = _trace(list(parents), reqs)
    ttft = TtftModel(100.0, 50.0)
    for name, make in POLICIES.items():
        kw = {"q_hat_tokens": 3.0} if name in TLRU_FAMILY else {}
        run = replay(trace, make(**kw), capacity, eviction, ttft, 600.0, record_states=True)
        queued = evaluate_schedule(trace, run.kept, capacity, eviction, ttft, 600.0, fcfs_server=True)
        plain = evaluate_schedule(trace, run.kept, capacity, eviction, ttft, 600.0)
        starts, finishes = _fcfs_by_events(trace.arrival_s, plain.ttft_ms.tolist())
        for r, block in run.evictions:
            pinned = {b for q in range(len(trace)) if starts[q] <= starts[r] < finishes[q] or q == r for b in trace.path(q).tolist()}
            assert block not in pinned, (name, r, block)
        np.testing.assert_allclose(queued.ttft_ms, np.asarray(finishes) - 1000.0 * trace.arrival_s, atol=1e-6)
        np.testing.assert_allclose(queued.ttft_ms - queued.wait_ms, plain.ttft_ms)


def test_with_no_waiting_the_server_changes_nothing_and_a_pinned_cache_serves_uncached():
    """Arrivals 10 s apart, prefills of at most 0.2 s: nobody waits, so every number equals instantaneous service.
    Capacity 2 under a 3-block path: all resident blocks are pinned, the path keeps its first two blocks and the
    request is served anyway (its third block computed, not cached)."""
    trace = _trace([-1, 0, 1], [(10, 2, 0), (10, 2, 0), (10, 1, 0)])
    ttft = TtftModel(1.0, 20.0)
    kept = replay(trace, POLICIES["lru"](), 2, "leaves", ttft, 30.0).kept
    queued = evaluate_schedule(trace, kept, 2, "leaves", ttft, 30.0, fcfs_server=True)
    plain = evaluate_schedule(trace, kept, 2, "leaves", ttft, 30.0)
    assert not queued.wait_ms.any()
    np.testing.assert_array_equal(queued.ttft_ms, plain.ttft_ms)
    assert (queued.tel_ms, queued.violations) == (plain.tel_ms, plain.violations)
    assert plain.hit_blocks.tolist() == [0, 2, 2]


def test_t_lru_evicts_the_surplus_first():
    """Blocks of 4 tokens, xi = 4 tokens (alpha 1 ms/token), Q_hat = 0, capacity 4.  Requests [3,4], [0,1,2], [5],
    [3,4].  Request 2's budget is 12 + 0 - 4 = 8 tokens, two blocks: its block 2 is surplus.  Inserting [5] must
    evict one leaf: T-LRU takes the surplus block 2, LRU the stalest leaf, block 3 (block 4 went when [0,1,2] came
    in).  So the last request hits block 3 under T-LRU only."""
    trace = _trace([-1, 0, 1, -1, 3, -1], [(0, 4, 0), (1, 2, 0), (1, 5, 0), (1, 4, 0)])
    kept_t = replay(trace, TLRU(q_hat_tokens=0.0), 4, "leaves", UNIT_TTFT, 4.0).kept
    kept_l = replay(trace, POLICIES["lru"](), 4, "leaves", UNIT_TTFT, 4.0).kept
    hits = [evaluate_schedule(trace, k, 4, "leaves", UNIT_TTFT, 4.0).hit_blocks.tolist() for k in (kept_t, kept_l)]
    assert hits == [[0, 0, 0, 1], [0, 0, 0, 0]]


def test_the_oracle_t_lru_variants_on_a_hand_worked_tree():
    """Blocks of 4 tokens, s = 4 tokens (alpha 1 ms/token, xi 4 ms), capacity 5.  Tree 0 -> 1 -> 2 -> 6, 3 -> 4, 5.
    Requests [0,1,2], [3,4], [5], [0,1,2,6], [3].  Request 0's path is used again whole (u = 3, by request 3, of 16
    tokens), request 1's only to block 3 (u = 1, by request 4, of 4 tokens).
    * T-LRU, Q_hat 0: request 0 keeps 12 - 4 = 8 tokens (2 blocks) and request 1 4 tokens (1 block); request 2 evicts the
      older surplus block, 2, so request 3 hits 2 blocks (8 tokens to prefill: 4 ms of TEL).
    * End-aware, Q_hat 100: keep tiers min(3, 3) = 3 and min(2, 1) = 1 blocks: block 4 is the only surplus, so request 3
      hits all 3 blocks (4 tokens to prefill: TTFT = xi).
    * Length-aware: request 0's continuation has 16 tokens, its budget 16 - 4 = 12 tokens (3 blocks); request 1's has 4, its
      budget 0: blocks 3 and 4 are surplus, block 4 goes first, request 3 hits 3 blocks."""
    trace = _trace([-1, 0, 1, -1, 3, -1, 2], [(0, 2, 0), (1, 4, 0), (1, 5, 0), (1, 6, 0), (1, 3, 0)])
    assert reused_depth(trace).tolist() == [3, 1, 0, 0, 0]
    assert continuation(trace).tolist() == [3, 4, -1, -1, -1]
    hits = {}
    for name, q_hat in (("t-lru", 0.0), ("end-aware-t-lru", 100.0), ("length-aware-t-lru", 0.0)):
        kept = replay(trace, POLICIES[name](q_hat_tokens=q_hat), 5, "leaves", UNIT_TTFT, 4.0).kept
        hits[name] = evaluate_schedule(trace, kept, 5, "leaves", UNIT_TTFT, 4.0).hit_blocks[3]
    assert hits == {"t-lru": 2, "end-aware-t-lru": 3, "length-aware-t-lru": 3}


@settings(max_examples=60, deadline=None)
@given(parents=forest, reqs=requests, q_hat=st.floats(0, 20), xi=st.floats(0, 40))
def test_oracle_budgets_against_a_scan_of_the_later_requests(parents, reqs, q_hat, xi):
    """u_r and r' by scanning every later request; end-aware keeps min(T-LRU's blocks, u_r); length-aware keeps
    ceil(clip(ceil(input[r'] - s), 0, L) / block) blocks (T-LRU's with Q_hat when r has no continuation)."""
    trace = _trace(list(parents), reqs)
    context = type("C", (), {"trace": trace, "capacity_blocks": 4, "eviction": "leaves", "ttft": UNIT_TTFT, "xi_ms": xi})()
    tlru, end, length = (POLICIES[n](q_hat_tokens=q_hat) for n in TLRU_FAMILY)
    for p in (tlru, end, length):
        p.bind(context)
    for r in range(len(trace)):
        path = trace.path(r).tolist()
        later = [set(trace.path(q).tolist()) for q in range(r + 1, len(trace))]
        depth = sum(1 for b in path if any(b in blocks for blocks in later))
        following = next((r + 1 + i for i, blocks in enumerate(later) if depth and path[depth - 1] in blocks), -1)
        assert end._budget_blocks[r] == min(tlru._budget_blocks[r], depth)
        need = trace.input_tokens[following] if following >= 0 else trace.input_tokens[r] + q_hat
        budget = min(max(np.ceil(need - xi - 1e-9), 0), trace.input_tokens[r])
        assert length._budget_blocks[r] == -(-int(budget) // BLOCK)


# ---------------------------------------------------------------- the one-pass LRU curve

@settings(max_examples=50, deadline=None)
@given(parents=forest, reqs=requests)
def test_one_pass_curve_equals_separate_replays(parents, reqs):
    trace = _trace(list(parents), reqs)
    distances = stack_distances(trace)
    capacities = list(range(0, 9))
    curve = distances.hit_tokens(capacities)
    for c, tokens in zip(capacities, curve, strict=True):
        for eviction in ("leaves", "any"):
            kept = replay(trace, POLICIES["lru"](), c, eviction).kept
            np.testing.assert_array_equal(kept, distances.kept(c))
            assert evaluate_schedule(trace, kept, c, eviction, UNIT_TTFT, 0.0).hit_tokens_total == tokens


def test_one_pass_curve_on_the_mooncake_sample():
    trace = read_block_trace(SAMPLE, "mooncake")
    distances = stack_distances(trace)
    for c in (2, 5, 9, 17):
        assert np.array_equal(distances.kept(c), replay(trace, POLICIES["lru"](), c).kept)


# ---------------------------------------------------------------- the hindsight optimum against brute force

def _brute_force(trace: BlockTrace, capacity: int, eviction: str, objective: str, ttft: TtftModel, xi_ms: float,
                 fcfs_server: bool = False) -> float:
    """Dynamic programming over resident sets: after request r the cache is any subset of (resident before) + (r's
    path) of at most ``capacity`` blocks (closed under parents for ``leaves``); independent of the gap reduction.
    With ``fcfs_server`` the state also holds when the server frees up: a request starts at ``max(arrival, free)``
    and its TTFT is its finish minus its arrival (a plain event simulation, not Lindley's recursion)."""
    parent = trace.block_parent
    best: dict[tuple[frozenset[int], float], float] = {(frozenset(), 0.0): 0.0}
    sign = -1.0 if objective == "hit_tokens" else 1.0
    for r in range(len(trace)):
        path = trace.path(r).tolist()
        first = int(trace.path_start[r])
        arrival_ms = 1000.0 * float(trace.arrival_s[r])
        nxt: dict[tuple[frozenset[int], float], float] = {}
        for (state, free_ms), value in best.items():
            h = next((k for k, b in enumerate(path) if b not in state), len(path))
            hit = int(trace.occ_tokens[first:first + h].sum())
            prefill_ms = float(ttft.ttft_ms(int(trace.input_tokens[r]) - hit))
            finish_ms = (max(arrival_ms, free_ms) if fcfs_server else arrival_ms) + prefill_ms
            ttft_ms = finish_ms - arrival_ms
            cost = {"hit_tokens": -hit, "tel": max(ttft_ms - xi_ms, 0.0), "violations": float(ttft_ms > xi_ms + 1e-9)}[objective]
            pool = sorted(state | set(path))
            for size in range(0, min(capacity, len(pool)) + 1):
                for subset in itertools.combinations(pool, size):
                    s = frozenset(subset)
                    if eviction == "leaves" and any(parent[b] >= 0 and parent[b] not in s for b in s):
                        continue
                    key = (s, round(finish_ms, 6) if fcfs_server else 0.0)
                    if value + cost < nxt.get(key, np.inf):
                        nxt[key] = value + cost
        best = nxt
    return sign * min(best.values())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parents=st.integers(1, 6).flatmap(lambda n: st.tuples(*[st.integers(-1, i - 1) for i in range(n)])),
       reqs=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 50), st.integers(0, 3)), min_size=1, max_size=6),
       capacity=st.integers(0, 4), eviction=st.sampled_from(["leaves", "any"]), objective=st.sampled_from(["hit_tokens", "tel", "violations"]),
       fcfs_server=st.booleans())
def test_milp_optimum_equals_brute_force(parents, reqs, capacity, eviction, objective, fcfs_server):
    """Without the server prefills take a few ms against arrivals a second apart; with it they take seconds (100 ms a
    token), so requests queue and the optimum must weigh a hit's shorter wait for the requests behind it."""
    trace = _trace(list(parents), reqs)
    ttft, xi = (TtftModel(100.0, 100.0), 1500.0) if fcfs_server else (TtftModel(1.0, 1.0), 6.0)
    result = solve_hindsight(trace, capacity, eviction, objective, ttft, xi, fcfs_server=fcfs_server)
    assert result.proven_optimal
    assert result.objective == pytest.approx(_brute_force(trace, capacity, eviction, objective, ttft, xi, fcfs_server))
    relaxed = solve_hindsight(trace, capacity, eviction, objective, ttft, xi, relax=True, fcfs_server=fcfs_server)
    better = (lambda a, b: a >= b - 1e-6) if objective == "hit_tokens" else (lambda a, b: a <= b + 1e-6)
    assert better(relaxed.bound, result.objective)  # the LP relaxation bounds the optimum
    assert better(result.objective, relaxed.objective)  # its rounded schedule is feasible, so no better


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parents=forest, reqs=requests, capacity=st.integers(1, 6), eviction=st.sampled_from(["leaves", "any"]),
       objective=st.sampled_from(["hit_tokens", "tel", "violations"]), fcfs_server=st.booleans())
def test_both_builders_give_the_same_lp_optimum_and_the_relaxed_closure_bounds_it(parents, reqs, capacity, eviction, objective,
                                                                                  fcfs_server):
    """The Pyomo model (interval capacity rows) and the highspy arrays (row-differenced) are one LP; with the closure
    relaxed to the parent's gap in the same request the arrays' optimum is still a bound on the MILP's."""
    trace = _trace(list(parents), reqs)
    ttft, xi = (TtftModel(100.0, 100.0), 1500.0) if fcfs_server else (TtftModel(1.0, 1.0), 6.0)
    pyomo_lp = solve_hindsight(trace, capacity, eviction, objective, ttft, xi, relax=True, fcfs_server=fcfs_server)
    arrays = lp_bound(trace, capacity, eviction, objective, ttft, xi, closure="full", fcfs_server=fcfs_server)
    assert arrays.status == "optimal"
    assert arrays.bound == pytest.approx(pyomo_lp.bound, abs=1e-6)
    relaxed = lp_bound(trace, capacity, eviction, objective, ttft, xi, fcfs_server=fcfs_server)
    optimum = solve_hindsight(trace, capacity, eviction, objective, ttft, xi, fcfs_server=fcfs_server).objective
    assert (relaxed.bound >= arrays.bound - 1e-6) if objective == "hit_tokens" else (relaxed.bound <= arrays.bound + 1e-6)
    assert (relaxed.bound >= optimum - 1e-6) if objective == "hit_tokens" else (relaxed.bound <= optimum + 1e-6)
    rounded = objective_value(evaluate_schedule(trace, relaxed.kept, capacity, eviction, ttft, xi, fcfs_server=fcfs_server), objective)
    assert (rounded <= optimum + 1e-6) if objective == "hit_tokens" else (rounded >= optimum - 1e-6)


def test_optimum_beats_every_policy_on_the_sample():
    trace = read_block_trace(SAMPLE, "mooncake")
    ttft, xi = TtftModel(0.1, 20.0), 300.0
    for objective in ("hit_tokens", "tel"):
        result = solve_hindsight(trace, 8, "leaves", objective, ttft, xi)
        assert result.proven_optimal
        for name, make in POLICIES.items():
            value = objective_value(evaluate_schedule(trace, replay(trace, make(), 8, "leaves", ttft, xi).kept, 8, "leaves", ttft, xi), objective)
            assert (value <= result.objective) if objective == "hit_tokens" else (value >= result.objective), name


# ---------------------------------------------------------------- the kind: shipped instance, CLI, bad trace

INSTANCE = REPO / "instances" / "prefix_cache" / "mooncake_sample.yaml"


def test_shipped_instance_pinned_optimum_and_every_policy_above_it():
    """Regression on the shipped sample (TEL ms of the proven hindsight optimum per capacity, HiGHS, gap 0)."""
    import optfleet

    table = optfleet.gap(str(INSTANCE))
    optimum = table[table.method == "optimum"]
    assert (optimum.status == "optimal").all()
    assert optimum.objective.tolist() == pytest.approx([1737.7, 832.0, 484.0, 484.0], abs=1e-6)
    for capacity, rows in table.groupby("capacity_blocks"):
        best = float(rows[rows.method == "optimum"].objective.iloc[0])
        assert (rows.objective >= best - 1e-6).all(), capacity
        assert (rows.bound == best).all()
        assert rows[rows.method == "lp-bound"].objective.iloc[0] >= best - 1e-6  # the rounded LP point is a schedule too


def test_a_bad_trace_exits_2_naming_the_field_and_line(tmp_path, capsys):
    from optfleet.cli import main
    from optfleet.errors import EXIT_BAD_INPUT

    lines = SAMPLE.read_text().splitlines()
    row = json.loads(lines[3])
    row["hash_ids"][1] = json.loads(lines[0])["hash_ids"][2]  # a block seen under another parent
    lines[3] = json.dumps(row)
    (tmp_path / "mooncake_conversation_sample.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "instance.yaml").write_text(INSTANCE.read_text())
    out = tmp_path / "out"
    assert main(["gap", str(tmp_path / "instance.yaml"), "--out", str(out)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "trace.hash_ids" in err and "line 4" in err and "two different parents" in err
    assert not out.exists()


def test_gap_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    from optfleet.cli import main

    png = tmp_path / "curves.png"
    assert main(["gap", str(INSTANCE), "--plot", str(png), "--methods", "lru,t-lru,optimum"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_gap_text_says_the_lp_bound_rows_status_is_the_lps(capsys):
    """The lp-bound row shows status optimal beside a gap of tens of percent: its status is the LP relaxation's, its
    objective the LP point rounded to a schedule; each capacity's head says so."""
    from optfleet.cli import main

    assert main(["gap", str(INSTANCE), "--methods", "lru,lp-bound", "--quiet"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    heads = [line for line in out.split("capacity ")[1:]]
    assert len(heads) == 4
    for head in heads:
        assert "(row lp-bound: status optimal is the LP's; its objective is the LP's point rounded to a schedule)" in head


def test_gap_with_the_fcfs_server_reports_waits_and_the_optimum_stays_below_every_policy(tmp_path, capsys):
    """The shipped sample with ``prefill_server: fcfs`` and a slow prefill (20 ms a token, so requests queue at 4
    blocks): the text names the server and shows the mean wait, and the proven optimum (with the wait rows) is at most
    every policy's TEL, which is above its TEL without the server (waits only add)."""
    import optfleet
    from optfleet.cli import main

    text = INSTANCE.read_text().replace("alpha_ms_per_token: 0.1", "alpha_ms_per_token: 20").replace("capacity_blocks: [4, 8, 12, 16]", "capacity_blocks: [4]")
    (tmp_path / "mooncake_conversation_sample.jsonl").write_text(SAMPLE.read_text())
    (tmp_path / "plain.yaml").write_text(text)
    (tmp_path / "fcfs.yaml").write_text(text + "prefill_server: fcfs\n")
    assert main(["gap", str(tmp_path / "fcfs.yaml"), "--methods", "lru", "--wide", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "TTFT = FCFS wait + prefill (one prefill server)" in out and "mean wait ms" in out
    queued = optfleet.gap(str(tmp_path / "fcfs.yaml"), methods=["lru", "end-aware-t-lru", "optimum"])
    plain = optfleet.gap(str(tmp_path / "plain.yaml"), methods=["lru", "end-aware-t-lru", "optimum"])
    best = float(queued[queued.method == "optimum"].objective.iloc[0])
    assert queued[queued.method == "optimum"].status.iloc[0] == "optimal"
    assert (queued.objective >= best - 1e-6).all()
    assert (queued.objective.to_numpy() >= plain.objective.to_numpy() - 1e-6).all()
    assert queued.objective.tolist() != plain.objective.tolist()
