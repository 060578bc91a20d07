"""The exact sentence selection (knapsack MILP through HiGHS): its optimum equals brute force on small prompts
(also with the contiguity bonus and the redundancy penalty), and greedy <= exact <= bound on random prompts."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from optfleet.compress import Objective, compress, prepare
from optfleet.compress.exact import exact_selection
from optfleet.compress.selection import greedy_selection, keep_mask, selection_value
from test_compress import random_texts

pytest.importorskip("sklearn")
pytestmark = pytest.mark.solved


def brute_force(scores, tokens, keep, budget, similarity, objective) -> float:
    """The best value over every selection that keeps ``keep`` and fits ``budget`` (-inf when none does)."""
    free = np.flatnonzero(~keep)
    best = -np.inf
    for bits in itertools.product([False, True], repeat=len(free)):
        chosen = keep.copy()
        chosen[free] = bits
        if tokens[chosen].sum() <= budget:
            best = max(best, selection_value(chosen, scores, similarity, objective))
    return best


def _prompt_and_budget(text: str, slack: float):
    """The prepared prompt and a budget ``slack`` of the way from its kept sentences' tokens to all of its tokens."""
    prompt = prepare(text)
    return prompt, int(prompt.kept_tokens + slack * (prompt.tokens.sum() - prompt.kept_tokens))


@settings(max_examples=30, deadline=None)
@given(n=st.integers(6, 13), seed=st.integers(0, 10_000), contiguity=st.sampled_from([0.0, 0.3]),
       redundancy=st.sampled_from([0.0, 0.8]), dynamic_program=st.booleans())
@example(n=9, seed=4829, contiguity=0.3, redundancy=0.0, dynamic_program=False)  # highspy 1.15.0 proved 4.3818 < 4.4460 optimal
def test_exact_equals_brute_force(n, seed, contiguity, redundancy, dynamic_program):
    rng = np.random.default_rng(seed)
    scores, tokens = rng.random(n), rng.integers(1, 30, n)
    similarity = rng.random((n, n))
    similarity = np.triu(similarity, 1) + np.triu(similarity, 1).T
    keep = keep_mask(n)
    budget = int(tokens[keep].sum() + rng.integers(0, tokens.sum() - tokens[keep].sum() + 1))
    objective = Objective(contiguity_bonus=contiguity, redundancy_penalty=redundancy, redundancy_threshold=0.6)
    chosen, report = exact_selection(scores, tokens, keep, budget, similarity, objective, start=None, dynamic_program=dynamic_program)
    assert report.status == "optimal"
    plain = contiguity == 0 and len(objective.redundant_pairs(similarity)[0]) == 0
    assert report.counts["bound_by_dynamic_program"] == int(plain and dynamic_program)
    assert chosen[keep].all() and tokens[chosen].sum() <= budget
    best = brute_force(scores, tokens, keep, budget, similarity, objective)
    assert selection_value(chosen, scores, similarity, objective) == pytest.approx(best, abs=1e-9)
    assert report.objective == pytest.approx(best, abs=1e-9)
    start = greedy_selection(scores, tokens, keep, budget, per_token=True)  # with a start: reduced-cost fixing (plain objective)
    _, started = exact_selection(scores, tokens, keep, budget, similarity, objective, start=start, dynamic_program=dynamic_program)
    assert started.objective == pytest.approx(best, abs=1e-9) and started.bound >= best - 1e-9


@settings(max_examples=25, deadline=None)
@given(text=random_texts, slack=st.floats(0.0, 1.0))
def test_greedy_never_beats_the_exact_selection(text, slack):
    prompt, budget = _prompt_and_budget(text, slack)
    scores = prompt.scores.composite
    greedy = greedy_selection(scores, prompt.tokens, prompt.keep, budget)
    chosen, report = exact_selection(scores, prompt.tokens, prompt.keep, budget, prompt.scores.similarity, Objective(), start=None)
    greedy_value = selection_value(greedy, scores, prompt.scores.similarity, Objective())
    assert report.status == "optimal"
    assert greedy_value <= report.objective + 1e-9 and report.objective <= report.bound + 1e-9
    assert prompt.tokens[chosen].sum() <= budget


def test_exact_compression_reports_the_greedy_gap_and_keeps_the_guarantee():
    text = " ".join(f"Sentence {i} talks about {'token budgets and pools' if i % 3 else 'a cache'} in round {i}." for i in range(40))
    result = compress(text, 300, 40, method="exact")
    assert result.report.status == "optimal" and result.report.counts["feasible_mip_starts"] == 1
    assert result.compressed_tokens + result.output_tokens <= 300
    assert result.greedy_value <= result.value + 1e-9
    assert result.greedy_gap_pct == pytest.approx(100 * (result.report.bound - result.greedy_value) / result.report.bound)
    assert result.greedy_gap_pct >= -1e-9


def test_reduced_cost_fixing_on_a_hand_worked_knapsack():
    """Ratios 2, 1.5, 1, 0.2; the LP takes the first two whole (9 tokens), the third is critical (r = 1), U = 16.
    Reduced costs s - r t: 5, 2, 0, -4; with an incumbent of 16, U - |d| < 16 fixes the first two in and the
    last out; the critical one (d = 0) stays free."""
    from optfleet.compress.exact import reduced_cost_fixing

    fix_in, fix_out = reduced_cost_fixing(np.array([10.0, 6.0, 3.0, 1.0]), np.array([5, 4, 3, 5]), np.zeros(4, dtype=bool), 9, 16.0)
    assert fix_in.tolist() == [True, True, False, False] and fix_out.tolist() == [False, False, False, True]
    fix_in, fix_out = reduced_cost_fixing(np.array([10.0, 6.0, 3.0, 1.0]), np.array([5, 4, 3, 5]), np.zeros(4, dtype=bool), 9, 11.5)
    assert fix_in.tolist() == [True, False, False, False] and not fix_out.any()  # 11 < 11.5 only: a weaker incumbent fixes less


@settings(max_examples=25, deadline=None)
@given(text=random_texts, slack=st.floats(0.0, 1.0))
def test_fixing_from_a_start_keeps_the_optimum_and_the_bound(text, slack):
    prompt, budget = _prompt_and_budget(text, slack)
    scores, similarity = prompt.scores.composite, prompt.scores.similarity
    start = greedy_selection(scores, prompt.tokens, prompt.keep, budget, per_token=True)
    fixed, fixed_report = exact_selection(scores, prompt.tokens, prompt.keep, budget, similarity, Objective(), start=start,
                                          dynamic_program=False)
    _, full_report = exact_selection(scores, prompt.tokens, prompt.keep, budget, similarity, Objective(), start=None, dynamic_program=False)
    assert fixed_report.status == full_report.status == "optimal"
    assert fixed_report.objective == pytest.approx(full_report.objective, abs=1e-9)
    assert fixed_report.bound >= full_report.objective - 1e-9 and prompt.tokens[fixed].sum() <= budget
    assert "fixed_by_reduced_cost" in fixed_report.counts and "fixed_by_reduced_cost" in full_report.counts


@settings(max_examples=25, deadline=None)
@given(text=random_texts, slack=st.floats(0.0, 1.0))
def test_the_dynamic_program_reaches_highs_own_optimum(text, slack):
    """The dynamic program's optimum (HiGHS then only checks it) equals the optimum HiGHS proves by branching."""
    prompt, budget = _prompt_and_budget(text, slack)
    scores, similarity = prompt.scores.composite, prompt.scores.similarity
    chosen, by_dp = exact_selection(scores, prompt.tokens, prompt.keep, budget, similarity, Objective())
    _, by_highs = exact_selection(scores, prompt.tokens, prompt.keep, budget, similarity, Objective(), dynamic_program=False)
    assert by_dp.status == by_highs.status == "optimal" and by_dp.counts["bound_by_dynamic_program"] == 1
    # HiGHS stops within its relative gap of 1e-9 (EXACT_MIP_GAP); the dynamic program is exact
    assert by_dp.objective == pytest.approx(by_highs.objective, rel=2e-9) and by_dp.bound == pytest.approx(by_highs.objective, rel=2e-9)
    assert by_dp.objective >= by_highs.objective - 1e-12 * max(1.0, by_highs.objective)
    assert prompt.tokens[chosen].sum() <= budget and chosen[prompt.keep].all()


def test_the_dynamic_program_on_a_hand_worked_knapsack():
    """Scores 10, 6, 6, 1 at 5, 4, 3, 5 tokens.  Room 7: by ratio (2, 1.5, 2, 0.2) a greedy takes the first (5
    tokens) and nothing else fits (10); the best is the second and third (12, 7 tokens).  Room 8: first and third
    (16, 8 tokens)."""
    from optfleet.compress.exact import knapsack_optimum

    scores, tokens, keep = np.array([10.0, 6.0, 6.0, 1.0]), np.array([5, 4, 3, 5]), np.zeros(4, dtype=bool)
    assert knapsack_optimum(scores, tokens, keep, 7).tolist() == [False, True, True, False]
    assert knapsack_optimum(scores, tokens, keep, 8).tolist() == [True, False, True, False]
    assert knapsack_optimum(np.ones(3), np.array([4, 4, 4]), np.array([True, True, False]), 7) is None  # the kept ones overflow


def test_a_choice_table_beyond_the_limit_leaves_the_proof_to_highs(monkeypatch):
    import optfleet.compress.exact as exact

    monkeypatch.setattr(exact, "DP_CELLS_LIMIT", 0)
    scores, tokens, keep = np.array([10.0, 6.0, 7.0, 1.0, 2.0, 3.0]), np.array([5, 4, 3, 5, 1, 1]), np.zeros(6, dtype=bool)
    chosen, report = exact.exact_selection(scores, tokens, keep, 10, np.zeros((6, 6)), Objective())
    assert report.status == "optimal" and report.counts["bound_by_dynamic_program"] == 0
    assert report.objective == pytest.approx(22.0)  # {5, 3, 1, 1}: 10 + 7 + 2 + 3
