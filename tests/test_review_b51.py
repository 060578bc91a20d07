"""Review b51 (Nov 28): the features of session 50 tried as a new user and as a hostile one (placement explain, the
whole-number break-even of caching and prefix_cache, pd_fleet ``decode.max_batch_by_gpu`` and ``simulate --plan``
with idle pools, capacity_plan ``solve``/``gap``/``explain``, the ``--help`` texts).

Each test states the rule it holds: bad input exits 2 with one line naming the field and the value, no traceback,
nothing written; a valid instance without a plan exits 1 and says why.  Each test failed before its fix."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from optfleet import api
from optfleet.cli import main
from optfleet.errors import EXIT_BAD_INPUT, EXIT_INFEASIBLE, InputError
from optfleet.sensitivity.api import explain

REPO = Path(__file__).resolve().parents[1]
CAPACITY_TINY = REPO / "instances" / "capacity_plan" / "tiny.yaml"
PLACEMENT_TINY = REPO / "instances" / "placement" / "tiny.yaml"
PD_CHAT = REPO / "instances" / "pd_fleet" / "chat.yaml"
FLEET_TOY = REPO / "instances" / "fleet" / "toy.yaml"
CACHING_TINY = REPO / "instances" / "caching" / "tiny.yaml"
MOONCAKE = REPO / "instances" / "prefix_cache" / "mooncake_sample.yaml"


def capacity_instance(tmp_path: Path, change) -> Path:
    """instances/capacity_plan/tiny.yaml with ``change(document)`` applied, written under ``tmp_path``."""
    document = copy.deepcopy(yaml.safe_load(CAPACITY_TINY.read_text()))
    change(document)
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one stderr line of a command that must exit 2 with nothing on stdout."""
    assert main(args) == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


# --- fixed here: capacity_plan schema and problem -----------------------------------------------------------------

def _set_tp(value: int):
    def change(document: dict) -> None:
        document["models"][0]["tp"] = {"A100": value}
    return change


@pytest.mark.unit
@pytest.mark.parametrize("value", [0, -2])
def test_capacity_plan_a_tp_below_one_is_refused_on_its_own_field(tmp_path, capsys, value):
    """``models[0].tp: {A100: 0}`` was reported as ``models[0].service.hardware.tp = 0``, a field the file does not have."""
    line = refused(["validate", str(capacity_instance(tmp_path, _set_tp(value)))], capsys)
    assert line.startswith(f"error: models.0.tp.A100 = {value}: "), line


@pytest.mark.unit
@pytest.mark.parametrize("entry", ["models", "gpus"])
def test_capacity_plan_an_empty_name_is_refused_on_its_own_field(tmp_path, capsys, entry):
    """An empty model name was accepted and the error blamed the demand (``demand.generator.chat ... (, batch)``)."""
    def change(document: dict) -> None:
        document[entry][0]["name"] = ""
    line = refused(["validate", str(capacity_instance(tmp_path, change))], capsys)
    assert line.startswith(f"error: {entry}.0.name = '': "), line


@pytest.mark.unit
@pytest.mark.parametrize("block, name, value", [("workload", "rate_rps", 5), ("hardware", "gpu", "H100-SXM")])
def test_capacity_plan_a_service_field_the_plan_sets_is_refused(tmp_path, capsys, block, name, value):
    """A service's ``workload.rate_rps`` or ``hardware.gpu`` was replaced without a word (the period's rate, the type's
    GPU): the plan sized something else than the file said."""
    def change(document: dict) -> None:
        document["models"][1]["service"] = copy.deepcopy(document["models"][1]["service"])
        document["models"][1]["service"][block][name] = value
    line = refused(["validate", str(capacity_instance(tmp_path, change))], capsys)
    assert line.startswith(f"error: models[1].service.{block}.{name} = "), line
    assert "is set by the capacity plan" in line


@pytest.mark.unit
def test_capacity_plan_a_bad_entry_of_a_per_period_spot_cap_list_is_named(tmp_path, capsys):
    """``spot.max_gpus: [1, -1, ...]`` was reported as ``max_gpus = [1, -1, ...]: Input should be a valid integer``
    (the union's other member): the entry and its rule are named now."""
    def change(document: dict) -> None:
        document["gpus"][1]["spot"]["max_gpus"] = [1, -1, 1, 1, 1, 1]
    line = refused(["validate", str(capacity_instance(tmp_path, change))], capsys)
    assert line.startswith("error: gpus.1.spot.max_gpus.1 = -1: ") and "greater than or equal to 0" in line, line


@pytest.mark.unit
def test_capacity_plan_per_period_spot_caps_still_load(tmp_path):
    """One cap per period (a list) and one cap for all (a number) both still read."""
    def change(document: dict) -> None:
        document["gpus"][1]["spot"]["max_gpus"] = [0, 1, 2, 3, 2, 1]
    problem = api.load(capacity_instance(tmp_path, change)).problem
    assert problem.offers[1].spot_cap.tolist() == [0, 1, 2, 3, 2, 1]
    assert api.load(CAPACITY_TINY).problem.offers[1].spot_cap.tolist() == [3] * 6


# --- fixed here: the command line ------------------------------------------------------------------------------------

@pytest.mark.solved
def test_explain_plot_creates_its_folder(tmp_path, capsys):
    """``explain --plot NEW/x.png`` printed the whole report, then ended with exit 3 (FileNotFoundError), where
    ``gap --plot`` creates the folder."""
    pytest.importorskip("matplotlib")
    target = tmp_path / "new" / "deeper" / "x.png"
    assert main(["explain", str(CACHING_TINY), "--curve", "capacity_tokens=50,100", "--no-alternatives", "--quiet",
                 "--plot", str(target)]) == 0
    assert target.stat().st_size > 0
    capsys.readouterr()


@pytest.mark.solved
def test_explain_plot_draws_the_default_curves(tmp_path, capsys):
    """``--plot`` without ``--curve`` was refused ("give at least one --curve") on kinds whose report draws a default
    curve (caching: the instance's capacities); it is refused only where there is no curve to draw."""
    pytest.importorskip("matplotlib")
    target = tmp_path / "caching.png"
    assert main(["explain", str(CACHING_TINY), "--no-alternatives", "--quiet", "--plot", str(target)]) == 0
    assert target.stat().st_size > 0
    capsys.readouterr()
    line = refused(["explain", str(PLACEMENT_TINY), "--quiet", "--plot", str(tmp_path / "placement.png")], capsys)
    assert line.startswith("error: --plot = ") and "--curve" in line, line
    assert not (tmp_path / "placement.png").exists()


@pytest.mark.unit
def test_a_plot_that_cannot_be_written_names_the_file(capsys):
    """The message named the folder (``--plot = '/proc'``) instead of the value given."""
    pytest.importorskip("matplotlib")
    line = refused(["gap", str(CAPACITY_TINY), "--plot", "/proc/x.png"], capsys)
    assert line.startswith("error: --plot = '/proc/x.png': "), line


# --- found here, fixed by the owners of the files named --------------------------------------------------------------

@pytest.mark.solved
def test_placement_explain_refuses_a_prefill_time_above_the_schema_limit():
    with pytest.raises(InputError, match="--curve"):
        explain(PLACEMENT_TINY, curves=["prefill_ms_per_token:gpu=1e12"], near_optimal=False)


@pytest.mark.solved
def test_an_alternative_as_good_as_a_zero_optimum_is_within():
    result = explain(PLACEMENT_TINY, near_optimal=True, **{"solve.objective": "ttft_excess"})
    assert result.base.objective == 0
    rows = result.alternatives[result.alternatives["objective"] == 0]
    assert len(rows) >= 1 and rows["within"].all()


@pytest.mark.solved
def test_prefix_cache_break_even_is_a_change_of_schedule():
    result = explain(MOONCAKE, break_even_of=["capacity_blocks"], near_optimal=False, capacity_blocks=[1000])
    row = result.break_even.iloc[0]
    # an ample cache keeps the same schedule over the whole search (1000 blocks: 200 to 5,000), so no break-even
    assert row["break_even"] is None and row["plan_there"] is None, row.to_dict()
    assert "the plan stays" in row["note"], row.to_dict()


@pytest.mark.unit
def test_placement_simulate_refuses_a_deeply_nested_plan(tmp_path, capsys):
    plan = tmp_path / "deep.json"
    plan.write_text("[" * 100_000 + "]" * 100_000)
    line = refused(["simulate", str(PLACEMENT_TINY), "--plan", str(plan), "--quiet"], capsys)
    assert line.startswith("error: --plan = "), line


@pytest.mark.unit
def test_pd_plan_row_of_both_modes_is_refused():
    problem = api.load(PD_CHAT).problem
    row = {"aggregated": "agg H100-SXM B2048", "instances": 2, "prefill": "P H100-SXM B2048", "prefill_instances": 1,
           "decode": "D H100-SXM b64", "decode_instances": 1}
    from optfleet.problems.pd_fleet.plan import plan_from_dict

    with pytest.raises(InputError, match=r"plan\.pools\[0\]"):
        plan_from_dict(problem, {"pools": [row]})
    with pytest.raises(InputError, match=r"plan\.pools\[0\]\.7"):  # a YAML file's integer key
        plan_from_dict(problem, {"pools": [{"aggregated": "agg H100-SXM B2048", "instances": 2, 7: "x"}]})


@pytest.mark.unit
def test_simulate_names_the_kind_of_another_kinds_plan(tmp_path, capsys):
    other = {"kind": "pd_fleet", "results": [{"method": "milp", "plan": {"method": "milp", "pools": [
        {"aggregated": "agg H100-SXM B2048", "instances": 2}]}}]}
    plan = tmp_path / "result.json"
    plan.write_text(json.dumps(other))
    line = refused(["simulate", str(FLEET_TOY), "--plan", str(plan), "--quiet"], capsys)
    assert "pd_fleet" in line, line


@pytest.mark.solved
def test_explain_of_an_infeasible_instance_exits_1_and_says_why(capsys):
    assert main(["explain", str(CAPACITY_TINY), "--set", "constraints=[{kind: budget, max_cost: 1}]", "--quiet"]) == EXIT_INFEASIBLE
    assert "budget" in capsys.readouterr().err
