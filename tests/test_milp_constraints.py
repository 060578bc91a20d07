"""User constraints on the fleet MILP: declarative kinds, the Python hook, errors, infeasibility culprits, gap."""

from __future__ import annotations

import copy
import json

import pyomo.environ as pyo
import pytest
import yaml

from optfleet.cli import main
from optfleet.errors import InfeasibleError, InputError
from optfleet.problems.fleet.milp import solve_milp
import optfleet
from optfleet.problems.fleet.simulate import simulate_plan

from support import FLEET_INSTANCES

pytestmark = pytest.mark.solved

TOY: dict = yaml.safe_load((FLEET_INSTANCES / "toy.yaml").read_text())


def _toy_with(tmp_path, constraints: list[dict], **solve) -> object:
    data = copy.deepcopy(TOY)
    data["constraints"] = constraints
    data["solve"] = {"method": "milp", **solve}
    path = tmp_path / "toy_constrained.yaml"
    path.write_text(yaml.safe_dump(data))
    return optfleet.load(path).problem


def test_budget_maximises_the_served_share(tmp_path):
    problem = _toy_with(tmp_path, [{"kind": "budget", "max_cost_per_hour": 10}])
    result = solve_milp(problem)
    plan = result.plan
    assert result.report.proven_optimal
    assert plan.served_share < 1.0
    evaluation = result.evaluation
    assert evaluation.cost_per_hour <= 10 + 1e-9 and evaluation.meets_slo
    # The full-rate optimum costs 17 GPUs; 10 GPUs serve at least 10/17 of the traffic with the same mix.
    assert plan.served_share >= 10 / 17 - 1e-6
    sim = simulate_plan(problem, plan, requests=40_000, reps=1, seed=3)
    served = sum(sim.metrics[p.name]["requests"][0] for p in plan.pools)
    assert served / (0.9 * 40_000) == pytest.approx(plan.served_share, rel=0.05)


def test_the_solve_table_says_which_baselines_break_a_constraint(tmp_path, capsys):
    """Found by a review: the text table showed "met" for baselines over the budget, with no note."""
    _toy_with(tmp_path, [{"kind": "budget", "max_cost_per_hour": 10}])
    assert main(["solve", str(tmp_path / "toy_constrained.yaml"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "met, breaks a constraint" in out and "  sweep: breaks constraints[0] (budget): $17.00/h > $10.00/h" in out


def test_fixed_availability_and_max_pools(tmp_path):
    problem = _toy_with(tmp_path, [
        {"kind": "fixed", "window_tokens": 4000, "instances": 8},
        {"kind": "availability", "gpu": "A100-80GB", "max_gpus": 20},
        {"kind": "max_pools", "count": 2},
    ])
    result = solve_milp(problem)
    assert {p.window_tokens: p.instances for p in result.plan.pools}[4000] == 8
    assert sum(p.instances for p in result.plan.pools) <= 20
    assert result.evaluation.meets_slo


def test_gpu_mix_of_the_only_type_below_one_is_infeasible_and_named(tmp_path):
    problem = _toy_with(tmp_path, [{"kind": "gpu_mix", "gpu": "A100-80GB", "max_share": 0.5}])
    with pytest.raises(InfeasibleError, match=r"dropping any one of constraints\[0\] \(gpu_mix\)"):
        solve_milp(problem)


def test_contradictory_constraints_are_explained(tmp_path):
    problem = _toy_with(tmp_path, [{"kind": "fixed", "window_tokens": 2000, "instances": 5}, {"kind": "max_pools", "count": 1}])
    with pytest.raises(InfeasibleError, match=r"constraints\[0\] \(fixed\), constraints\[1\] \(max_pools\)"):
        solve_milp(problem)


@pytest.mark.parametrize(("constraint", "field"), [
    ({"kind": "fixed", "window_tokens": 3000, "instances": 1}, "constraints[0].window_tokens"),
    ({"kind": "availability", "gpu": "H100-SXM", "max_gpus": 4}, "constraints[0].gpu"),
    ({"kind": "gpu_mix", "gpu": "A100-80GB", "min_share": 0.8, "max_share": 0.2}, "constraints[0].min_share"),
])
def test_bad_constraints_name_the_field(tmp_path, constraint, field):
    with pytest.raises(InputError, match=field.replace("[", r"\[").replace("]", r"\]")):
        solve_milp(_toy_with(tmp_path, [constraint]))


def test_unknown_constraint_kind_exits_2(tmp_path, capsys):
    data = copy.deepcopy(TOY)
    data["constraints"] = [{"kind": "carbon", "max": 3}]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["solve", str(path)]) == 2
    assert "constraints.0" in capsys.readouterr().err


def test_python_hook_adds_a_constraint_by_component_name(tmp_path):
    problem = optfleet.load(FLEET_INSTANCES / "toy.yaml").problem

    def at_least_ten_long_gpus(m: pyo.ConcreteModel) -> None:
        m.min_long = pyo.Constraint(expr=m.n[m.data.long_index] >= 10)

    result = solve_milp(problem, customize=at_least_ten_long_gpus)
    assert {p.window_tokens: p.instances for p in result.plan.pools}[4000] >= 10
    assert result.evaluation.cost_per_hour > 17.0 and result.evaluation.meets_slo


def test_gap_command_table_and_files(tmp_path, capsys):
    assert main(["gap", str(FLEET_INSTANCES / "toy.yaml"), "--out", str(tmp_path), "--json"]) == 0
    rows = {r["method"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["milp"]["gap_pct"] == pytest.approx(0.0)
    assert rows["sweep"]["gap_pct"] == pytest.approx(0.0)
    assert rows["homogeneous"]["gap_pct"] == pytest.approx(100 * (26 - 17) / 17, rel=1e-3)
    assert (tmp_path / "gap.csv").exists() and (tmp_path / "gap.json").exists()
    assert main(["gap", str(FLEET_INSTANCES / "toy.yaml"), "--methods", "sweep,bogus"]) == 2


def test_gap_reports_the_milp_as_unavailable_under_the_paper_rule_with_length_scaled_iteration(tmp_path, capsys):
    scaled = (FLEET_INSTANCES / "toy.yaml").read_text().replace(
        "iteration: {w_ms: 1.0, h_ms_per_slot: 0.0, chunk_tokens: 1000}",
        "iteration: {w_ms: 1.0, h_ms_per_slot: 0.0, chunk_tokens: 1000, scaling: length_scaled, length_scale_tokens: 2000}")
    (tmp_path / "toy.yaml").write_text(scaled)
    assert main(["gap", str(tmp_path / "toy.yaml"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {r["method"]: r for r in data["rows"]}
    assert rows["milp"]["status"] == "not_available" and "paper TTFT rule" in rows["milp"]["note"]
    assert rows["sweep"]["gap_pct"] is None and rows["sweep"]["bound"] is None  # no bound was computed: no gap
    assert data["references"][0]["bound"] is None and data["references"][0]["reason"].startswith("no bound")


@pytest.mark.parametrize("constraint", [{"kind": "availability", "gpu": "FOO", "max_gpus": 3},
                                        {"kind": "gpu_mix", "gpu": "FOO", "min_share": 0.2},
                                        {"kind": "node_multiple", "gpu": "FOO", "gpus_per_node": 8}])
def test_an_unknown_gpu_in_a_constraint_is_refused_at_validate_naming_the_constraint(tmp_path, capsys, constraint):
    data = {**copy.deepcopy(TOY), "constraints": [{"kind": "max_pools", "count": 2}, constraint]}
    (tmp_path / "toy_constrained.yaml").write_text(yaml.safe_dump(data))
    assert main(["validate", str(tmp_path / "toy_constrained.yaml")]) == 2
    assert "constraints[1].gpu = 'FOO'" in capsys.readouterr().err
