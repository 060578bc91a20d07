"""The sizing rules as methods (rule_plans.py): each pool on the pair the rule itself would pick, at the rule's own
counts, scored by the one evaluator."""

from __future__ import annotations

import pytest

from optfleet.errors import InfeasibleError
from optfleet.instance import load_instance
from optfleet.problems.pd_fleet.evaluator import evaluate
from optfleet.problems.pd_fleet.kind import KIND
from optfleet.problems.pd_fleet.problem import prepare
from optfleet.problems.pd_fleet.rule_plans import DYNAMO_SLA, XPYD_RATIO, rule_plan, size_pair
from optfleet.progress import silent

from support import REPO

pytestmark = pytest.mark.unit

MIXED = REPO / "instances" / "pd_fleet" / "mixed_gpus.yaml"
RAG = REPO / "instances" / "pd_fleet" / "rag_long_prompt.yaml"


@pytest.mark.parametrize("method", [DYNAMO_SLA, XPYD_RATIO])
@pytest.mark.parametrize("path", [MIXED, RAG], ids=lambda p: p.stem)
def test_each_pool_takes_the_rules_counts_on_its_cheapest_pair(method, path):
    problem = prepare(load_instance(path))
    chosen = rule_plan(problem, method)
    for pool in problem.busy_pools:
        choice = chosen.plan.pools[pool.index]
        prefill, decode = problem.option(choice.prefill), problem.option(choice.decode)
        sizing = size_pair(problem, pool, prefill, decode, method)
        assert (choice.prefill_instances, choice.decode_instances) == (sizing.prefill_instances, sizing.decode_instances)
        assert chosen.sizings[pool.index] == sizing
        cost = choice.prefill_instances * prefill.cost_per_instance_hour + choice.decode_instances * decode.cost_per_instance_hour
        for p in problem.prefill:  # no pair the rule sizes is cheaper at the rule's own counts
            for d in problem.decode:
                try:
                    other = size_pair(problem, pool, p, d, method)
                except InfeasibleError:
                    continue
                assert cost <= other.prefill_instances * p.cost_per_instance_hour + other.decode_instances * d.cost_per_instance_hour + 1e-9


def test_the_kind_scores_the_rules_plans_with_the_one_evaluator_and_labels_them():
    problem = prepare(load_instance(RAG))
    (row,) = KIND.run(problem, DYNAMO_SLA, silent)
    assert row.evaluation == evaluate(problem, rule_plan(problem, DYNAMO_SLA).plan)
    # the shipped RAG instance: the mean-based rule buys less than the MILP's optimum and misses the P99 TTFT target
    assert not row.feasible and "P99 TTFT" in row.note
    assert "Dynamo SLA planner" in row.columns["assumes"] and "no queue" in row.columns["assumes_detail"]
    assert DYNAMO_SLA in KIND.gap_methods(problem) and XPYD_RATIO in KIND.gap_methods(problem)
