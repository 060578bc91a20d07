"""optfleet explain on prefix_cache (issue 39 for the prefix-tree kind): the LP relaxation's duals checked by finite
differences, the binding rows of the MILP's schedule, TEL monotone in capacity, bad options exit 2."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.models import prefix_cache as milp
from optfleet.problems.prefix_cache.hindsight import prepare
from optfleet.solvers.sensitivity import fixed_lp_sensitivity
from tests.support import REPO, assert_explain_refuses, explain_objectives
from tests.test_explain import duals_checked_by_finite_differences, solved_for_explain

SAMPLE = REPO / "instances" / "prefix_cache" / "mooncake_sample.yaml"  # TEL, leaves-only eviction, capacities 4, 8, 12, 16 blocks


@pytest.fixture(scope="module")
def sample():
    problem, explainer, solved = solved_for_explain(SAMPLE)
    assert solved.objective == pytest.approx(1737.7, abs=0.05)  # stop 47's proven optimum at 4 blocks
    return problem, explainer, solved


def test_the_lp_relaxations_duals_match_finite_differences_and_sum_to_the_price_of_capacity(sample):
    problem, explainer, solved = sample
    data = prepare(problem.trace, 4, problem.eviction, problem.objective, problem.ttft, problem.xi_ms)
    relaxed = milp.build(data, relax=True)
    lp = fixed_lp_sensitivity(relaxed)
    shown = explainer.analyse(problem, solved).tables["shadow_prices"]
    capacity_rows = [row for row in lp.rows if row.name.startswith("capacity[")]
    per_block = shown.loc[shown["unit"] == "TEL ms per block", "shadow_price"].iloc[0]
    assert per_block == pytest.approx(sum(row.dual for row in capacity_rows)) and per_block < 0  # more cache, less TEL
    assert lp.report.objective <= solved.objective + 1e-6  # the relaxation bounds the MILP
    priced = [row.name for row in capacity_rows if abs(row.dual) > 1e-9]
    assert duals_checked_by_finite_differences(relaxed, lp, priced, lambda m: []) >= 2


def test_the_binding_rows_are_read_off_the_milps_schedule(sample):
    problem, explainer, solved = sample
    binding = explainer.analyse(problem, solved).tables["binding"].set_index("rows")
    capacity = binding.loc["(2) blocks kept after an event within C"]
    assert capacity["binding"] >= 1 and capacity["least_slack"] == 0  # the optimum fills the cache somewhere
    assert "(3) a kept block's parent is kept" in binding.index  # leaves-only eviction: the tree rows (3)


@settings(max_examples=3, deadline=None)
@given(st.lists(st.integers(0, 16), min_size=2, max_size=2))
def test_tel_is_monotone_in_capacity(capacities):
    small, large = explain_objectives(SAMPLE, "capacity_blocks", sorted(capacities))
    assert large <= small + 1e-6


@pytest.mark.parametrize(("args", "option"), [
    (["--curve", "capacity_blocks=-1,4"], "--curve"),
    (["--curve", "slo_ms=100,200"], "--curve"),  # a TEL instance: its threshold is xi_ms
    (["--curve", "percentile=0.9,0.99"], "--curve"),
])
def test_bad_options_exit_2_naming_the_option(args, option, capsys):
    assert_explain_refuses(SAMPLE, args, option, capsys)


def test_thresholds_and_capacities_keep_to_an_instance_files_domain(capsys):
    """xi_ms may be 0 in an instance file, so a curve may reach it (a review found it refused); a capacity is at least
    one block, as in the file."""
    from optfleet.cli import main

    for path in (SAMPLE, REPO / "instances" / "caching" / "tiny.yaml"):
        assert main(["explain", str(path), "--quiet", "--no-alternatives", "--curve", "xi_ms=0,50", "--json"]) == 0, capsys.readouterr().err
        capsys.readouterr()
    assert_explain_refuses(SAMPLE, ["--curve", "capacity_blocks=0,4"], "[1, 9.0072e+15]", capsys)
