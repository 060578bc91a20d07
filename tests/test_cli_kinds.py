"""The command line on every instance kind: profiled fleets solve and gap, the fleet-only commands say what to run instead."""

from __future__ import annotations

import json

import pytest

from optfleet.cli import main

from support import REPO

MELANGE = str(REPO / "instances" / "profiled" / "melange_example.yaml")
TINY_CACHE = str(REPO / "instances" / "caching" / "tiny.yaml")


def test_profiled_solve_prints_the_melange_answer_and_json(capsys, tmp_path):
    assert main(["solve", MELANGE]) == 0
    assert "milp: 3 A10G + 1 A100-80GB; $6.70/h" in capsys.readouterr().out
    assert main(["solve", MELANGE, "--json", "--out", str(tmp_path)]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["cost_per_hour"] == pytest.approx(6.70) and body["solver"]["status"] == "optimal"
    assert json.loads((tmp_path / "result.json").read_text())["plan"] == body["plan"]


def test_profiled_gap_compares_every_single_type(capsys, tmp_path):
    assert main(["gap", MELANGE, "--json", "--out", str(tmp_path)]) == 0
    body = json.loads(capsys.readouterr().out)
    methods = {r["method"]: r for r in body["rows"]}
    assert methods["single:A100-80GB"]["cost_per_hour"] == pytest.approx(7.34)
    assert body["mixed_vs_best_single"]["savings_pct"] == pytest.approx(100 * (7.34 - 6.70) / 7.34)
    assert (tmp_path / "gap.csv").is_file()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["solve", TINY_CACHE], "optfleet gap FILE"),
        (["simulate", MELANGE], "applies to kind fleet"),
        (["solve", MELANGE, "--method", "sweep"], "--method"),
        (["solve", MELANGE, "--preset", "fleetsim_compatible"], "preset"),
    ],
)
def test_commands_that_do_not_apply_exit_2_with_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_validate_summarises_a_gpu_catalog(capsys):
    assert main(["validate", str(REPO / "instances" / "fleet" / "azure_2023_catalog.yaml")]) == 0
    assert "gpu catalog: 8 configurations (A100-80GB x4, A100-80GB x8, H100-SXM x4" in capsys.readouterr().out
