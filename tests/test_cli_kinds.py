"""The command line on every instance kind: profiled fleets and caching through solve and gap, and the commands
or methods that do not apply to a kind refused with one line."""

from __future__ import annotations

import json

import pytest

from optfleet.cli import main

from support import REPO

pytestmark = pytest.mark.solved

MELANGE = str(REPO / "instances" / "profiled" / "melange_example.yaml")
TINY_CACHE = str(REPO / "instances" / "caching" / "tiny.yaml")


def test_profiled_solve_prints_the_melange_answer_and_json(capsys, tmp_path):
    assert main(["solve", MELANGE]) == 0
    assert "milp: 3 A10G + 1 A100-80GB; $6.70/h" in capsys.readouterr().out
    assert main(["solve", MELANGE, "--json", "--out", str(tmp_path)]) == 0
    body = json.loads(capsys.readouterr().out)
    (result,) = body["results"]
    assert result["objective"] == pytest.approx(6.70) and result["solver"]["status"] == "optimal"
    assert json.loads((tmp_path / "result.json").read_text())["results"][0]["plan"] == result["plan"]


def test_profiled_gap_compares_every_single_type(capsys, tmp_path):
    assert main(["gap", MELANGE, "--json", "--out", str(tmp_path)]) == 0
    body = json.loads(capsys.readouterr().out)
    methods = {r["method"]: r for r in body["rows"]}
    assert methods["milp:A100-80GB"]["objective"] == pytest.approx(7.34)
    assert methods["milp:A100-80GB"]["gap_pct"] == pytest.approx(100 * (7.34 - 6.70) / 6.70)
    summary = body["summary"]["mixed_vs_best_single_type"]
    assert summary["savings_pct"] == pytest.approx(100 * (7.34 - 6.70) / 7.34)
    assert (tmp_path / "gap.csv").is_file()


def test_caching_solve_runs_the_hindsight_optimum_at_every_capacity(capsys):
    assert main(["solve", TINY_CACHE, "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert [(r["capacity_tokens"], r["objective"], r["status"]) for r in body["results"]] == [(100, 10.0, "optimal"), (200, 0.0, "optimal")]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", MELANGE], "has no simulator"),
        (["solve", MELANGE, "--method", "sweep"], "--method = 'sweep': unknown method"),
        (["solve", MELANGE, "--preset", "fleetsim_compatible"], "preset (--preset) = 'fleetsim_compatible': does not apply to kind profiled_fleet"),
        (["solve", MELANGE, "--method", ""], "--method = '': unknown method"),  # not the default method
        (["validate", "/dev/null"], "instance = '/dev/null': not a regular file"),
        (["gap", TINY_CACHE, "--methods", "lru,bogus"], "--methods = 'bogus'"),
        (["gap", MELANGE, "--plot", "x.png"], "has no plot"),
    ],
)
def test_commands_that_do_not_apply_exit_2_with_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_validate_summarises_a_gpu_catalog(capsys):
    assert main(["validate", str(REPO / "instances" / "fleet" / "azure_2023_catalog.yaml")]) == 0
    assert "gpu catalog: 8 configurations (A100-80GB x4, A100-80GB x8, H100-SXM x4" in capsys.readouterr().out
