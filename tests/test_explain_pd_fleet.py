"""optfleet explain on pd_fleet (issue 39 for the disaggregation kind): duals checked by finite differences, every role
of a least plan binds a limit, cost monotone in the rate, prices reuse the sizing, bad options exit 2."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.problems.pd_fleet.exact import candidates, solved_model
from optfleet.solvers.sensitivity import fixed_lp_sensitivity
from tests.support import REPO, assert_explain_refuses, explain_objectives
from tests.test_explain import duals_checked_by_finite_differences, solved_for_explain

PD = REPO / "instances" / "pd_fleet"
MIXED = PD / "mixed_gpus.yaml"  # one disaggregated pool under an H100 availability cap
CHAT = PD / "chat.yaml"  # one aggregated pool


@pytest.fixture(scope="module")
def mixed():
    return solved_for_explain(MIXED)


def test_pd_duals_match_finite_differences(mixed):
    """Each shown dual is the fixed LP's change in cost per unit of its row's bound, both ways inside its range; a least
    row's is its instance price, stated per instance of the requirement."""
    problem, explainer, solved = mixed
    model = solved_model(problem, solved.detail)
    continuous = lambda m: [m.n_agg, m.x, m.y]  # noqa: E731
    lp = fixed_lp_sensitivity(model, continuous=continuous(model))
    assert lp.report.objective == pytest.approx(solved.objective)
    shown = explainer.analyse(problem, solved).tables["shadow_prices"]
    assert sorted(shown["constraint"]) == ["least decode instances", "least prefill instances"]
    for _, row in shown.iterrows():
        option = problem.option(solved.detail.plan.pools[0].prefill if "prefill" in row["constraint"] else solved.detail.plan.pools[0].decode)
        assert row["shadow_price"] == pytest.approx(option.cost_per_instance_hour)
    assert duals_checked_by_finite_differences(model, lp, shown["row"], continuous) >= 2


def test_every_role_of_a_frontier_plan_binds_a_limit_and_the_cap_binds(mixed):
    """A frontier point is a least (x, y): one prefill or one decode instance fewer breaks some limit, and the binding
    table names which; the 16-GPU H100 cap is met exactly by 4 prefill instances of 4 GPUs."""
    problem, explainer, solved = mixed
    binding = explainer.analyse(problem, solved).tables["binding"]
    pool = binding[binding["pool"] != "fleet"]
    named = {role for binds in pool["binds"] for role in binds.split(", ") if role}
    assert named == {"prefill", "decode"}
    assert (pool["slack"] >= 0).all() and (pool.loc[pool["binds"] == "", "slack"] >= 0).all()
    (cap,) = binding[binding["pool"] == "fleet"].itertuples()
    assert cap.binds == "yes" and cap.slack == pytest.approx(0.0) and cap.value == pytest.approx(16)


def test_an_aggregated_pool_binds_on_its_instances():
    problem, explainer, solved = solved_for_explain(CHAT)
    binding = explainer.analyse(problem, solved).tables["binding"]
    assert set(binding["limit"]) == {"P99 TTFT", "P99 TPOT", "slot occupancy"}
    assert "instances" in set(binding["binds"])  # the least count: one fewer breaks a limit


@settings(max_examples=3, deadline=None)
@given(st.lists(st.floats(0.5, 2.5), min_size=2, max_size=2))
def test_cost_is_monotone_in_the_rate(growths):
    low, high = explain_objectives(CHAT, "rate_growth", sorted(growths))
    assert low <= high + 1e-9


def test_a_price_change_reuses_the_sizing_and_scales_the_instances_it_prices(mixed):
    problem, explainer, solved = mixed
    repriced = explainer.parameters["price:A100-80GB"].apply(problem, 3.0)
    assert candidates(repriced)[1] is candidates(problem)[1]  # the same sized pairs, not sized again
    chosen = solved.detail.plan.pools[0]
    decode = repriced.option(chosen.decode)
    assert decode.cost_per_instance_hour == pytest.approx(decode.tp * 3.0) and repriced.gpus["A100-80GB"].cost_per_gpu_hour == 3.0
    was = problem.gpus["A100-80GB"].cost_per_gpu_hour
    assert explainer.solve(repriced).objective == pytest.approx(solved.objective + chosen.decode_instances * decode.tp * (3.0 - was))


@pytest.mark.parametrize(("args", "option"), [
    (["--curve", "percentile=0.9,0.99"], "--curve"),  # pd_fleet plans at P99 only: no percentile parameter
    (["--curve", "tpot_ms=0,10"], "--curve"),
    (["--curve", "rho_max=0.5,1.5"], "--curve"),
    (["--curve", "link_gb_per_s=1e-300,1"], "--curve"),  # below the 1 MB/s an instance file may give (it overflowed)
    (["--break-even", "price:B200"], "--break-even"),
])
def test_bad_options_exit_2_naming_the_option(args, option, capsys):
    assert_explain_refuses(CHAT, args, option, capsys)


@pytest.mark.parametrize("curve, message", [("rho_max=0.5:1:3", "rho_max = 1 is outside (0, 1)"),
                                            ("price:H100-SXM=1:1e300:2", "is outside (0, 1e+06]")])
def test_curve_domains_are_the_instance_files(curve, message, capsys):
    # each curve takes the values its field takes in an instance file: rho_max < 1, prices up to $1e6
    assert_explain_refuses(CHAT, ["--curve", curve], message, capsys)


def test_the_slowest_link_an_instance_file_takes_is_a_curve_point():
    # 1e-3 GB/s, the least an instance file takes: the chat pool stays aggregated (no KV transfer), at the same cost
    slowest, shipped = explain_objectives(CHAT, "link_gb_per_s", [1e-3, 50.0])
    assert slowest == pytest.approx(shipped)
