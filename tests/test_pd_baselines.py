"""The literature's sizing rules for one disaggregated pool (optfleet/problems/pd_fleet/baselines.py): hand-computed
cases, monotonicity properties, their labels, bad input, and the case that motivates percentile sizing (the
mean-based Dynamo rule misses a P99 TTFT target)."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from optfleet.engine.step import AffineStep
from optfleet.errors import InfeasibleError, InputError
from optfleet.problems.pd_fleet import baselines
from optfleet.problems.pd_fleet.baselines import (
    SIZING_RULES,
    DynamoSizing,
    XpydSizing,
    dynamo_sla_sizing,
    mean_lengths,
    prompt_prefill_ms,
    xpyd_ratio_sizing,
)
from optfleet.queueing.kimura import wait_quantile_s

pytestmark = pytest.mark.unit

RULES = tuple(SIZING_RULES.values())


def size(rule, l_in, l_out, rate_rps, prefill, decode, *, token_budget=2048, max_batch=64, ttft_ms=1000.0,
         tpot_ms=50.0, weight=None, **options):
    """``rule`` on a mix of prompt lengths ``l_in`` and output lengths ``l_out`` (equal weights unless given)."""
    l_in, l_out = np.atleast_1d(l_in), np.atleast_1d(l_out)
    return rule(l_in, l_out, np.ones(l_in.size) if weight is None else weight, rate_rps, prefill_step=prefill,
                token_budget=token_budget, decode_step=decode, max_batch=max_batch, ttft_ms=ttft_ms, tpot_ms=tpot_ms,
                **options)


def test_dynamo_by_hand():
    """Prefill: ``t = 10 + 0.05 p + 1e-5 pairs(p, o)`` ms, budget 512, one prompt length 1000: chunks of 512 (offset
    0, 131,328 pairs) and 488 (offset 512, 488 x 512 + 488 x 489 / 2 = 369,172 pairs), so
    ``T_pf = 2 x 10 + 0.05 x 1000 + 1e-5 x 500,500 = 75.005`` ms and an instance prefills ``1000 / 0.075005``
    tokens/s.  At 40 req/s the load is 40,000 tokens/s: ``x = ceil(40 x 0.075005) = ceil(3.0002) = 4`` (without the
    attention pairs it would be ceil(2.8) = 3).

    Decode: ``t = 8 + 0.25 b + 1e-4 k``; mean context ``1000 + 200 / 2 = 1100``, so ``ITL(b) = 8 + 0.36 b``; the
    largest b with ``ITL <= 26.1`` ms is 50 (ITL 26 ms; b = 51 gives 26.36), 50,000 / 26 = 1923.08 tokens/s per
    instance; the load is 40 x 200 = 8000 tokens/s: ``y = ceil(4.16) = 5``."""
    prefill = AffineStep(10.0, 0.0, 0.0, 0.05, 1e-5)
    decode = AffineStep(8.0, 0.25, 1e-4, 0.0, 0.0)
    plan = size(dynamo_sla_sizing, 1000, 200, 40.0, prefill, decode, token_budget=512, ttft_ms=100.0, tpot_ms=26.1)
    assert plan.prefill_ttft_ms == pytest.approx(75.005)
    assert plan.prefill_tokens_per_s == pytest.approx(1000 / 0.075005)
    assert (plan.decode_context_tokens, plan.decode_concurrency) == (1100.0, 50)
    assert plan.decode_itl_ms == pytest.approx(26.0)
    assert plan.decode_tokens_per_s == pytest.approx(50_000 / 26)
    assert (plan.prefill_instances, plan.decode_instances) == (4, 5)
    assert plan.ttft_met_without_queue and plan.itl_met


def test_dynamo_falls_back_to_one_sequence_when_no_concurrency_meets_the_itl():
    """``ITL(1) = 8 + 0.36 = 8.36`` ms > 8 ms: as their ``find_best_throughput_per_gpu``, the rule sizes at the least
    concurrency, ``b* = 1`` (119.6 tokens/s per instance; 5 x 200 / 119.6 = 8.36, so 9 instances), and says so."""
    plan = size(dynamo_sla_sizing, 1000, 200, 5.0, AffineStep(10.0, 0.0, 0.0, 0.05, 0.0),
                AffineStep(8.0, 0.25, 1e-4, 0.0, 0.0), tpot_ms=8.0, ttft_ms=40.0)
    assert (plan.decode_concurrency, plan.decode_instances, plan.itl_met) == (1, 9, False)
    assert not plan.ttft_met_without_queue  # 60 ms > 40 ms, yet (3) sized the prefill all the same


def test_xpyd_by_hand():
    """Prefill ``t = 10 + 0.04 p``, one prompt of 1000 tokens in one chunk: ``T_p = 50`` ms, ``P = 20`` req/s per
    instance; ``1.8 x 50 = 90 <= 100`` ms meets the TTFT target.  Decode ``t = 10 + 0.5 b``, 100 output tokens:
    ``TPOT(b) = 10 + 0.5 b <= 20.2`` allows b <= 20, and ``D(b) = 1000 b / (100 (10 + 0.5 b))`` grows with b, so
    ``c_d = 20``, ``D = 10`` req/s.  Undiminished (derates 1), ``min(20 x, 10 y) / (x + y) <= 20/3`` with equality
    exactly at ``y = 2x``; the first in the decode-outer loop is 1P2D, serving 20 req/s.  At 45 req/s:
    ``r = ceil(45 / 20) = 3`` units, 3 prefill and 6 decode instances."""
    plan = size(xpyd_ratio_sizing, 1000, 100, 45.0, AffineStep(10.0, 0.0, 0.0, 0.04, 0.0),
                AffineStep(10.0, 0.5, 0.0, 0.0, 0.0), ttft_ms=100.0, tpot_ms=20.2, prefill_derate=1.0, decode_derate=1.0)
    assert (plan.prefill_concurrency, plan.prefill_ttft_ms, plan.prefill_seqs_per_s) == (1, 50.0, 20.0)
    assert (plan.decode_concurrency, plan.decode_tpot_ms, plan.decode_seqs_per_s) == (20, 20.0, 10.0)
    assert (plan.ratio_prefill, plan.ratio_decode, plan.unit_seqs_per_s, plan.units) == (1, 2, 20.0, 3)
    assert (plan.prefill_instances, plan.decode_instances) == (3, 6)


def test_xpyd_ratio_is_the_brute_force_best_unit_with_aiconfigurators_constants():
    """With the default derates (0.9, 0.92) and two GPUs per prefill instance, the unit is the first best of a
    plain double loop over 1..32 workers (decode outer, strict improvement, as aiconfigurator's ``_match_workers``)."""
    prefill, decode = AffineStep(10.0, 0.0, 0.0, 0.04, 2e-6), AffineStep(9.0, 0.3, 2e-5, 0.0, 0.0)
    plan = size(xpyd_ratio_sizing, [800, 3000], [150, 400], 70.0, prefill, decode, weight=[3.0, 1.0],
                ttft_ms=500.0, tpot_ms=30.0, prefill_gpus=2)
    p, d = 0.9 * plan.prefill_seqs_per_s, 0.92 * plan.decode_seqs_per_s
    best, best_xy = 0.0, None
    for y in range(1, 33):
        for x in range(1, 33):
            value = min(p * x, d * y) / (2 * x + y)
            if value > best * (1 + 1e-12):
                best, best_xy = value, (x, y)
    assert (plan.ratio_prefill, plan.ratio_decode) == best_xy
    assert plan.units == math.ceil(70.0 / min(p * best_xy[0], d * best_xy[1]))
    assert (plan.prefill_instances, plan.decode_instances) == (plan.units * best_xy[0], plan.units * best_xy[1])


def test_xpyd_finds_nothing_when_a_target_cannot_be_met():
    """1.8 x 50 ms = 90 ms > 80 ms: no prefill candidate; ``TPOT(1) = 10.5`` ms > 10 ms: no decode candidate."""
    prefill, decode = AffineStep(10.0, 0.0, 0.0, 0.04, 0.0), AffineStep(10.0, 0.5, 0.0, 0.0, 0.0)
    with pytest.raises(InfeasibleError, match="ttft_ms = 80"):
        size(xpyd_ratio_sizing, 1000, 100, 5.0, prefill, decode, ttft_ms=80.0)
    with pytest.raises(InfeasibleError, match="tpot_ms = 10"):
        size(xpyd_ratio_sizing, 1000, 100, 5.0, prefill, decode, ttft_ms=100.0, tpot_ms=10.0)


def test_xpyd_buys_more_under_a_looser_tpot_at_a_low_rate():
    """The rule's own consequence (module docstring): derates 1, ``P = 20`` req/s.  At ``tpot_ms = 12.55`` the decode
    ``t = 10 + 0.1 b`` allows b = 25, ``D = 25,000 / (100 x 12.5) = 20``: 1P1D is best, 2 instances carry 10 req/s.
    At 13.05 ms, b = 30 and ``D = 23.08``: a 15P13D unit is 7 % more efficient per GPU (300 / 28 vs 20 / 2), and the
    one unit the rate needs is 28 instances."""
    prefill, decode = AffineStep(10.0, 0.0, 0.0, 0.04, 0.0), AffineStep(10.0, 0.1, 0.0, 0.0, 0.0)
    plans = [size(xpyd_ratio_sizing, 1000, 100, 10.0, prefill, decode, ttft_ms=100.0, tpot_ms=tpot,
                  prefill_derate=1.0, decode_derate=1.0) for tpot in (12.55, 13.05)]
    tight, loose = plans
    assert (tight.ratio_prefill, tight.ratio_decode, tight.prefill_instances + tight.decode_instances) == (1, 1, 2)
    assert loose.unit_seqs_per_s / (loose.ratio_prefill + loose.ratio_decode) > tight.unit_seqs_per_s / 2
    assert loose.prefill_instances + loose.decode_instances > tight.prefill_instances + tight.decode_instances


def p99_prefill_ttft_ms(instances: int, rate_rps: float, service_ms: float, quantile: float = 0.99) -> float:
    """The P99 of prefill wait + prefill when every prompt takes ``service_ms`` (Cs^2 = 0): Kimura's M/G/c wait
    quantile (optfleet/queueing/kimura.py, Erlang C) plus the prefill.  The pool's TTFT adds the KV transfer and the
    first decode step to each request's wait + prefill, so its P99 can only be larger."""
    load = rate_rps * service_ms / 1e3
    return 1e3 * float(wait_quantile_s(instances, load, service_ms / 1e3, 0.0, quantile)) + service_ms


def test_dynamos_mean_rule_misses_a_p99_ttft_target():
    """One prompt length (1000 tokens, 50 ms alone on an idle instance), 78 req/s: the mean rule buys
    ``ceil(78 x 0.05) = ceil(3.9) = 4`` prefill instances, 97.5 % busy.  The mean prompt's 50 ms meets the 150 ms
    target, so the planner sees nothing wrong; but the M/G/c P99 wait at 4 servers and 3.9 erlangs is over a second
    (``ln(C / 0.01) x 0.05 / (2 x 0.1)`` s with C = 0.945: 1137 ms), and the least count whose P99 TTFT meets 150 ms
    is 5 (about 140 ms)."""
    prefill, decode = AffineStep(10.0, 0.0, 0.0, 0.04, 0.0), AffineStep(10.0, 0.5, 0.0, 0.0, 0.0)
    plan = size(dynamo_sla_sizing, 1000, 100, 78.0, prefill, decode, ttft_ms=150.0, tpot_ms=40.0)
    assert plan.prefill_ttft_ms == 50.0 and plan.ttft_met_without_queue
    assert plan.prefill_instances == 4
    p99 = p99_prefill_ttft_ms(plan.prefill_instances, 78.0, plan.prefill_ttft_ms)
    assert p99 > 1000.0 > 150.0
    enough = next(c for c in range(1, 100) if p99_prefill_ttft_ms(c, 78.0, plan.prefill_ttft_ms) <= 150.0)
    assert enough == 5 > plan.prefill_instances


def test_the_worked_example_runs():
    """The module docstring's worked example (the docs section) is executed: its numbers are the functions'."""
    outcome = doctest.testmod(baselines, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert outcome.attempted >= 8 and outcome.failed == 0


def test_labels_say_what_each_rule_assumes():
    prefill, decode = AffineStep(10.0, 0.0, 0.0, 0.04, 0.0), AffineStep(10.0, 0.5, 0.0, 0.0, 0.0)
    dynamo = size(dynamo_sla_sizing, 1000, 100, 20.0, prefill, decode, ttft_ms=100.0, tpot_ms=20.2)
    xpyd = size(xpyd_ratio_sizing, 1000, 100, 20.0, prefill, decode, ttft_ms=100.0, tpot_ms=20.2)
    assert isinstance(dynamo, DynamoSizing) and isinstance(xpyd, XpydSizing)
    assert (dynamo.method, xpyd.method) == ("dynamo-sla", "xpyd-ratio")
    assert {name: rule.__name__ for name, rule in SIZING_RULES.items()} == {"dynamo-sla": "dynamo_sla_sizing",
                                                                           "xpyd-ratio": "xpyd_ratio_sizing"}
    for plan in (dynamo, xpyd):
        assert "mean" in plan.assumes and "no percentile" in plan.assumes and "KV transfer" in plan.assumes
    assert "fixed concurrency" in dynamo.assumes and "no queue" in dynamo.assumes
    assert "not a queue model" in xpyd.assumes and f"{xpyd.ratio_prefill}P{xpyd.ratio_decode}D" in xpyd.assumes


def test_chunked_prefill_and_weighted_means():
    """1300 tokens at budget 512: chunks 512, 512, 276 at offsets 0, 512, 1024 -> 3 x 10 ms + 0.04 x 1300 = 82 ms;
    the mix (100, 1000) weighted 3:1 has mean prompt 325 and mean output (10 x 3 + 50) / 4 = 20."""
    assert prompt_prefill_ms(AffineStep(10.0, 0.0, 0.0, 0.04, 0.0), 1300, 512) == pytest.approx(82.0)
    assert mean_lengths([100, 1000], [10, 50], [3, 1]) == (325.0, 20.0)


@pytest.mark.parametrize(("field", "change"), [
    ("rate_rps", {"rate_rps": 0.0}), ("ttft_ms", {"ttft_ms": float("nan")}), ("max_batch", {"max_batch": 0}),
    ("token_budget", {"token_budget": 1.5}), ("weight", {"weight": [-1.0]}), ("l_in", {"l_in": [0]}),
    ("l_in", {"l_in": [100, 200]}), ("l_out", {"l_out": [float("inf")]}),
])
@pytest.mark.parametrize("rule", RULES)
def test_bad_input_names_the_field(rule, field, change):
    arguments = {"l_in": [1000], "l_out": [100], "weight": [1.0], "rate_rps": 5.0, "ttft_ms": 100.0, "tpot_ms": 20.2,
                 "max_batch": 64, "token_budget": 2048} | change
    with pytest.raises(InputError) as error:
        rule(arguments.pop("l_in"), arguments.pop("l_out"), arguments.pop("weight"), arguments.pop("rate_rps"),
             prefill_step=AffineStep(10.0, 0.0, 0.0, 0.04, 0.0), decode_step=AffineStep(10.0, 0.5, 0.0, 0.0, 0.0),
             **arguments)
    assert error.value.field == field


prefill_engines = st.builds(lambda base, token, pair: AffineStep(base, 0.0, 0.0, token, pair),
                            st.floats(1.0, 30.0), st.floats(0.0, 0.2), st.floats(0.0, 1e-5))
decode_engines = st.builds(lambda base, seq, kv: AffineStep(base, seq, kv, 0.0, 0.0),
                           st.floats(1.0, 30.0), st.floats(0.0, 1.0), st.floats(0.0, 1e-4))
loosening = st.tuples(st.floats(1.0, 3.0), st.floats(1.0, 3.0))
mixes = st.lists(st.tuples(st.integers(1, 8000), st.integers(1, 1000), st.floats(0.1, 10.0)), min_size=1, max_size=4)


def _counts(rule, mix, rate, prefill, decode, ttft_ms, tpot_ms, budget, max_batch) -> tuple[int, int] | None:
    l_in, l_out, weight = (np.array(column) for column in zip(*mix))
    try:
        plan = size(rule, l_in, l_out, rate, prefill, decode, weight=weight, token_budget=budget,
                    max_batch=max_batch, ttft_ms=ttft_ms, tpot_ms=tpot_ms)
    except InfeasibleError:
        return None
    return plan.prefill_instances, plan.decode_instances


@settings(max_examples=40, deadline=None)
@given(mix=mixes, prefill=prefill_engines, decode=decode_engines,
       rates=st.tuples(st.floats(0.01, 500.0), st.floats(1.0, 3.0)),
       ttft_ms=st.floats(50.0, 20_000.0), tpot_ms=st.floats(5.0, 200.0), budget=st.sampled_from((256, 2048, 8192)),
       max_batch=st.integers(1, 256), rule=st.sampled_from(RULES))
def test_more_rate_never_fewer_instances(mix, prefill, decode, rates, ttft_ms, tpot_ms, budget, max_batch, rule):
    low, high = (_counts(rule, mix, rate, prefill, decode, ttft_ms, tpot_ms, budget, max_batch)
                 for rate in (rates[0], rates[0] * rates[1]))
    assume(low is not None)
    assert high is not None and high[0] >= low[0] and high[1] >= low[1]


@settings(max_examples=40, deadline=None)
@given(mix=mixes, prefill=prefill_engines, decode=decode_engines, rate=st.floats(0.01, 500.0),
       ttft_ms=st.floats(50.0, 20_000.0), tpot_ms=st.floats(5.0, 200.0),
       looser=loosening, budget=st.sampled_from((256, 2048, 8192)), max_batch=st.integers(1, 256))
def test_looser_targets_never_more_instances_under_dynamo(mix, prefill, decode, rate, ttft_ms, tpot_ms, looser,
                                                          budget, max_batch):
    """Affine engines: ``b / ITL(b)`` grows with b, so a looser ITL target (a larger ``b*``) never lowers the decode
    throughput; the TTFT target does not enter (3)."""
    tight = _counts(dynamo_sla_sizing, mix, rate, prefill, decode, ttft_ms, tpot_ms, budget, max_batch)
    loose = _counts(dynamo_sla_sizing, mix, rate, prefill, decode, ttft_ms * looser[0], tpot_ms * looser[1],
                    budget, max_batch)
    assert loose[0] <= tight[0] and loose[1] <= tight[1]


@settings(max_examples=40, deadline=None)
@given(mix=mixes, prefill=prefill_engines, decode=decode_engines, rate=st.floats(0.01, 500.0),
       ttft_ms=st.floats(50.0, 20_000.0), tpot_ms=st.floats(5.0, 200.0),
       looser=loosening, budget=st.sampled_from((256, 2048, 8192)), max_batch=st.integers(1, 256))
def test_looser_targets_never_a_less_efficient_xpyd_unit(mix, prefill, decode, rate, ttft_ms, tpot_ms, looser, budget,
                                                        max_batch):
    """What the xPyD rule does guarantee under looser targets: it stays feasible and its unit serves at least as many
    requests per GPU (counts can grow, :func:`test_xpyd_buys_more_under_a_looser_tpot_at_a_low_rate`)."""
    l_in, l_out, weight = (np.array(column) for column in zip(*mix))

    def unit_per_gpu(ttft: float, tpot: float) -> float | None:
        try:
            plan = size(xpyd_ratio_sizing, l_in, l_out, rate, prefill, decode, weight=weight,
                        token_budget=budget, max_batch=max_batch, ttft_ms=ttft, tpot_ms=tpot)
        except InfeasibleError:
            return None
        return plan.unit_seqs_per_s / (plan.ratio_prefill + plan.ratio_decode)

    tight = unit_per_gpu(ttft_ms, tpot_ms)
    assume(tight is not None)
    loose = unit_per_gpu(ttft_ms * looser[0], tpot_ms * looser[1])
    assert loose is not None and loose >= tight * (1 - 1e-12)
