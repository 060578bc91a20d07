"""The placement kind through the CLI: a solved placement written by ``solve --out`` (plan.json) and printed by
``solve --json`` is what ``simulate --plan`` scores; labels cannot take a method's name; per-step SLO attainment."""

from __future__ import annotations

import json

import pytest

import optfleet
from optfleet.cli import main
from optfleet.errors import InputError

from support import REPO

TINY = REPO / "instances" / "placement" / "tiny.yaml"


def test_solve_out_writes_the_placement_that_simulate_scores_alike(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["solve", str(TINY), "--method", "load_prefix_111", "--out", str(out), "--quiet"]) == 0
    plan = json.loads((out / "plan.json").read_text())
    result = json.loads((out / "result.json").read_text())["results"][0]
    assert plan["method"] == "load_prefix_111" and plan["placement"] == result["placement"]
    assert len(plan["placement"]) == len(optfleet.load(TINY).problem.requests)
    capsys.readouterr()
    assert main(["simulate", str(TINY), "--plan", str(out / "plan.json"), "--json"]) == 0
    simulated = json.loads(capsys.readouterr().out)
    assert simulated["replications"][0]["objective_ms"] == pytest.approx(result["objective"])


@pytest.mark.parametrize("label", ["hindsight_milp", "relaxation_bound", "least_requests"])
def test_a_label_cannot_take_a_method_or_another_policys_name(label):
    with pytest.raises(InputError) as caught:
        optfleet.load(TINY, policies=[{"name": "round_robin", "label": label}])
    assert caught.value.field == "policies[0].label" and caught.value.value == label


def test_the_per_step_lines_give_the_slo_attainment(capsys):
    ladder = "workload.arrivals={process: stepped, steps: [{rate_rps: 2, duration_s: 5}, {rate_rps: 4, duration_s: 5}]}"
    assert main(["solve", str(TINY), "--method", "round_robin", "--set", "slo.ttft_ms=60", "--set", ladder, "--quiet"]) == 0
    steps = [line for line in capsys.readouterr().out.splitlines() if " rps: " in line]
    assert steps and all("SLO met" in line for line in steps)


def test_simulate_reads_the_placement_of_solve_json_output(tmp_path, capsys):
    assert main(["solve", str(TINY), "--method", "round_robin", "--json", "--quiet"]) == 0
    solved = tmp_path / "solved.json"
    solved.write_text(capsys.readouterr().out)
    objective = json.loads(solved.read_text())["results"][0]["objective"]
    assert main(["simulate", str(TINY), "--plan", str(solved), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["replications"][0]["objective_ms"] == pytest.approx(objective)
