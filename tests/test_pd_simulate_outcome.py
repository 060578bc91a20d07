"""``optfleet simulate`` on pd_fleet instances: the MILP's plan or a plan file, every pool simulated (disaggregated by
stage, aggregated by the fleet's batching simulator) and compared with the one evaluator."""

from __future__ import annotations

import json

import pytest

from optfleet.cli import main

from support import REPO

pytestmark = pytest.mark.solved

RAG = str(REPO / "instances" / "pd_fleet" / "rag_long_prompt.yaml")
FAST = ("--requests", "2000", "--reps", "2")


def test_simulate_json_is_one_document_with_both_pools_compared(capsys):
    assert main(["simulate", RAG, *FAST, "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["kind"] == "pd_fleet" and body["plan"]["method"] == "milp" and body["evaluation"]["feasible"]
    modes = {row["pool"]: row["mode"] for row in body["comparison"]}
    assert modes == {0: "aggregated", 1: "disaggregated"}  # the shipped answer: pool 1 disaggregated
    metrics = {(row["pool"], row["metric"]) for row in body["comparison"]}
    for metric in ("P99 TTFT ms", "P99 TPOT ms", "mean TPOT ms", "prefill utilisation", "link utilisation", "decode utilisation"):
        assert (1, metric) in metrics
    assert (0, "slots utilisation") in metrics
    for row in body["comparison"]:
        assert row["simulated"] > 0 and row["requests"] == 1801  # from arrival floor(0.1 x 1,999) = 199 on
    # the disaggregated pool's link utilisation is lambda E[tau] / x in both: it agrees closely at any run length
    link = next(r for r in body["comparison"] if r["metric"] == "link utilisation")
    assert abs(link["rel_error"]) < 0.05
    for row in body["attainment"]:
        assert 0.0 <= row["attainment"] <= 1.0


def test_a_solve_output_simulates_as_the_plan_it_holds(capsys, tmp_path):
    assert main(["solve", RAG, "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["simulate", RAG, "--plan", str(tmp_path / "result.json"), "--requests", "1000", "--reps", "1", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    solved = json.loads((tmp_path / "result.json").read_text())["results"][0]["plan"]
    assert body["plan"]["pools"] == solved["pools"]


AGG_POOL = {"aggregated": "agg H100-SXM x8 B2048", "instances": 2}


@pytest.mark.parametrize(("pools", "field"), [
    ([AGG_POOL, {"prefill": "P H100-SXM x8 B8192", "prefill_instances": 0, "decode": "D H200 x8 b64", "decode_instances": 2}],
     "plan.pools[1].prefill_instances"),
    ([AGG_POOL, {"prefill": "P nothing", "prefill_instances": 2, "decode": "D H200 x8 b64", "decode_instances": 2}],
     "plan.pools[1].prefill"),
    ([None], "plan.pools"),
])
def test_a_bad_plan_file_names_its_field_and_exits_2(capsys, tmp_path, pools, field):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"pools": pools}))
    assert main(["simulate", RAG, "--plan", str(path), *FAST]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and f"{field} = " in captured.err and str(path) in captured.err


def test_mode_is_refused_naming_the_option(capsys):
    assert main(["simulate", RAG, "--mode", "slots"]) == 2
    assert "--mode" in capsys.readouterr().err
