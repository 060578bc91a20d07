"""The command line: tables, JSON, output files, validate, catalog, exit codes."""

from __future__ import annotations

import json

import pytest

from optfleet.cli import main
from optfleet.problems.fleet.plan import Plan

from support import FLEET_INSTANCES, prose

pytestmark = pytest.mark.solved

TOY = str(FLEET_INSTANCES / "toy.yaml")


def test_solve_prints_the_sweep_and_every_baseline(capsys):
    assert main(["solve", TOY]) == 0
    out = capsys.readouterr().out
    assert "sweep: B* = 2000, gamma* = 2.0, n_short = 10, n_long = 7; 17 GPUs" in out
    for method in ("homogeneous", "pool-routing", "retrofit"):
        assert method in out
    assert "34.6 % below homogeneous" in prose(out)


def test_solve_json_is_machine_readable(capsys):
    assert main(["solve", TOY, "--json", "--method", "pool-routing"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["method"] == "pool-routing"
    (result,) = data["results"]
    assert result["objective"] == 20.0 and result["objective_unit"] == "$/h" and result["gpus"] == 20
    assert result["evaluation"]["total_instances"] == 20 and result["plan"]["pools"][0]["instances"] == 7
    assert {b["method"] for b in data["baselines"]} == {"homogeneous", "retrofit", "sweep"}
    assert result["evaluation"]["pools"][0]["binding"] == "utilisation"
    closed_forms = data["summary"]["savings_vs_homogeneous"]["pool-routing"]
    assert closed_forms["evaluated_pct"] == pytest.approx(100 * (1 - 20 / 26)) and closed_forms["naive_pct"] is not None


def test_solve_out_writes_result_plan_report_and_candidates(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["solve", TOY, "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["candidates.csv", "plan.json", "report.txt", "result.json"]
    plan = Plan.from_dict(json.loads((out / "plan.json").read_text()))
    assert [p.instances for p in plan.pools] == [10, 7] and plan.gamma == 2.0
    assert len((out / "candidates.csv").read_text().splitlines()) == 1 + 1 + 11


def test_infeasible_instance_exits_1_and_explains(capsys):
    assert main(["solve", str(FLEET_INSTANCES / "agent_heavy.yaml")]) == 1
    out = capsys.readouterr().out
    assert "needs P99 prefill 938.4 ms + one iteration 18.4 ms > SLO 500 ms" in prose(out)


def test_preset_flag_switches_the_service_model(capsys):
    assert main(["solve", str(FLEET_INSTANCES / "agent_heavy.yaml"), "--preset", "fleetsim_compatible", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ttft_rule"] == "fleetsim" and data["results"][0]["gpus"] == 1851


def test_validate_summarises(capsys):
    assert main(["validate", str(FLEET_INSTANCES / "azure_2023.yaml")]) == 0
    out = capsys.readouterr().out
    assert "valid fleet instance 'azure-2023'" in out and "17 boundaries x 11 gammas" in out and "service model slots" in out


def test_catalog_lists_gpus_and_models_with_sources(capsys):
    assert main(["catalog"]) == 0
    out = capsys.readouterr().out
    for name in ("A10G", "H100-SXM", "MI300X", "Llama-3-70B", "Qwen3-235B-A22B"):
        assert name in out
    assert main(["catalog", "--source", "roofline", "--json"]) == 0
    roofline = json.loads(capsys.readouterr().out)["roofline"]
    assert all(row["source"] for row in roofline["gpus"] + roofline["models"])


def test_out_pointing_at_a_file_or_an_unwritable_folder_is_refused_before_any_work(tmp_path, capsys):
    existing = tmp_path / "report.txt"
    existing.write_text("keep me")
    assert main(["solve", TOY, "--out", str(existing)]) == 2
    assert "--out" in capsys.readouterr().err and existing.read_text() == "keep me"
    assert main(["gap", TOY, "--out", str(existing / "run")]) == 2  # below a file: no folder can be made there
    assert "cannot be written" in capsys.readouterr().err and existing.read_text() == "keep me"


def test_version_set_and_time_limit_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.startswith("optfleet ")
    assert main(["solve", TOY, "--set", "workload.rate_rps=200", "--set", "solve.method=homogeneous", "--json", "--quiet"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rate_rps"] == 200 and data["method"] == "homogeneous"
    assert main(["solve", TOY, "--set", "workload.rate_rps"]) == 2
    assert "--set" in capsys.readouterr().err
    assert main(["solve", TOY, "--method", "milp", "--time-limit", "30", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["results"][0]["status"] == "optimal"


def test_set_null_removes_a_field_so_its_default_applies(capsys):
    # toy.yaml sets slo.rho_max: 0.8; removed, the kind's default applies
    assert main(["validate", TOY, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rho_max"] == 0.8
    assert main(["validate", TOY, "--set", "slo.rho_max=null", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rho_max"] == 0.85
    # a field the instance does not set (a misspelling) is an error, not a silent no-op
    assert main(["validate", TOY, "--set", "slo.rho_maxx=null"]) == 2
    assert "slo.rho_maxx" in capsys.readouterr().err
    assert main(["validate", TOY, "--set", "no.such.field=null"]) == 2
    assert "no = 'null': cannot remove no.such.field" in capsys.readouterr().err


def test_an_internal_error_is_one_line_with_exit_3_and_a_traceback_with_debug(capsys, monkeypatch):
    import optfleet.api

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(optfleet.api, "validate", broken)
    assert main(["validate", TOY]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ZeroDivisionError: a bug" in err and "--debug" in err
    with pytest.raises(ZeroDivisionError):
        main(["validate", TOY, "--debug"])
