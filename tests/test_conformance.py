"""The conformance suite every registered problem kind passes (as scikit-learn's ``check_estimator`` does).

For each kind in :data:`optfleet.registry.KINDS` (a new kind adds one entry
to :data:`KIND_CASES` and is done when this module passes):

* every shipped instance of the kind loads, validates and says its name, offline and with an empty cache (as on
  a fresh clone: a dataset it names ships with optfleet);
* ``solve`` and ``gap`` through the Python API and through the CLI give the
  same rows, every row has the core columns first, JSON round-trips, missing
  values are ``null`` (never NaN), and a gap is empty exactly when there is no
  bound, no feasible plan, or no finite percentage (a zero bound);
* the kind's bad inputs exit 2 with one line naming the field and the value,
  and nothing is written.

Solving every shipped instance both ways is in the slow tier; the default run
solves the smallest instance of each kind.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

import optfleet
from optfleet.cli import main
from optfleet.errors import EXIT_BAD_INPUT
from optfleet.registry import KINDS, kind
from optfleet.results import CORE_COLUMNS

from support import REPO

pytestmark = pytest.mark.solved

INSTANCES = REPO / "instances"

# kind -> its shipped instances' folder, its smallest instance, and bad inputs: (dotted field, value, text in the message)
KIND_CASES: dict[str, dict[str, Any]] = {
    "fleet": {
        "folder": INSTANCES / "fleet",
        "small": INSTANCES / "fleet" / "toy.yaml",
        "bad": [("workload.rate_rps", -1, "-1"), ("slo.rho_max", 1.5, "1.5"), ("solve.method", "annealing", "annealing"),
                ("solve.time_limit_s", 0, "0"), ("constraints", [{"kind": "carbon"}], "carbon")],
    },
    "profiled_fleet": {
        "folder": INSTANCES / "profiled",
        "small": INSTANCES / "profiled" / "melange_example.yaml",
        "bad": [("workload.rate_rps", 0, "0"), ("workload.shares", [[0.5, 0.5]], "shares"), ("solve.method", "greedy", "greedy"),
                ("routing.max_utilisation", 2, "2")],
    },
    "caching": {
        "folder": INSTANCES / "caching",
        "small": INSTANCES / "caching" / "tiny.yaml",
        "bad": [("xi_ms", -1, "-1"), ("capacity_tokens", [0], "0"), ("policies", ["mru"], "mru"), ("ttft.alpha_ms_per_token", 0, "0")],
    },
    "prefix_cache": {
        "folder": INSTANCES / "prefix_cache",
        "small": INSTANCES / "prefix_cache" / "mooncake_sample.yaml",
        "bad": [("xi_ms", -1, "-1"), ("capacity_blocks", [0], "0"), ("policies", ["mru"], "mru"), ("trace.format", "vllm", "vllm"),
                ("trace.block_tokens", 16, "16"), ("objective", "cost", "cost")],
    },
    "reserved": {
        "folder": INSTANCES / "reserved",
        "small": INSTANCES / "reserved" / "tiny.yaml",
        "bad": [("profile.tau_tokens_per_s_per_unit", 0, "0"), ("plans.percentiles", [1.5], "1.5"), ("solve.method", "annealing", "annealing"),
                ("trace.time_unit", "hours", "hours"), ("max_units", 0, "0")],
    },
    "routing": {
        "folder": INSTANCES / "routing",
        "small": INSTANCES / "routing" / "tiny.yaml",
        "bad": [("calibrator.decay", 1.5, "1.5"), ("dispatcher.b_short_tokens", 3000, "3000"), ("dispatcher.compress_gamma", 0.5, "0.5"),
                ("unknown_category", "guess", "guess"), ("solve.method", "annealing", "annealing")],
    },
    "pd_fleet": {
        "folder": INSTANCES / "pd_fleet",
        "small": INSTANCES / "pd_fleet" / "chat.yaml",
        "bad": [("workload.rate_rps", 0, "0"), ("slo.rho_max", 1.5, "1.5"), ("solve.method", "annealing", "annealing"),
                ("links.default_gb_per_s", 0, "0"), ("prefill.gpus", [], "prefill.gpus")],
    },
    "placement": {
        "folder": INSTANCES / "placement",
        "small": INSTANCES / "placement" / "tiny.yaml",
        "bad": [("servers", [], "[]"), ("workload.shared_prefix.question_len", -5, "-5"), ("slo.ttft_ms", -1, "-1"),
                ("policies", ["mru"], "mru"), ("policies", [{"name": "load_prefix", "weights": {"prefix": 0, "queue": 0, "kv": 0}}], "weights"),
                ("solve.method", "annealing", "annealing")],
    },
    "capacity_plan": {
        "folder": INSTANCES / "capacity_plan",
        "small": INSTANCES / "capacity_plan" / "tiny.yaml",
        "bad": [("gpus.1.spot.confidence", 0, "0"), ("gpus.0.reserved.term_periods", 7, "7"), ("periods", 0, "0"),
                ("solve.method", "annealing", "annealing"), ("demand.generator.chat.mean_rps", -1, "-1")],
    },
}


def _instances(name: str) -> list[Path]:
    return sorted(p for p in KIND_CASES[name]["folder"].glob("*.yaml") if yaml.safe_load(p.read_text()).get("kind") == name)


SLOW_INSTANCES = {"month_ten_models"}
"""Shipped instances validated in the slow tier only: month_ten_models (capacity_plan, 10 models x 720 hours) sizes
its capacity table in about 12 s of CPU."""

SHIPPED = [pytest.param(name, path, id=f"{name}:{path.stem}", marks=[pytest.mark.slow] if path.stem in SLOW_INSTANCES else [])
           for name in KINDS for path in _instances(name)]


def test_every_registered_kind_has_a_conformance_entry_and_shipped_instances():
    assert set(KIND_CASES) == set(KINDS)
    for name in KINDS:
        assert _instances(name), f"kind {name} ships no instance"
        assert kind(name).name == name


def test_the_shipped_instances_are_every_instance_file():
    assert sorted(p for _, p in (param.values for param in SHIPPED)) == sorted(INSTANCES.rglob("*.yaml"))


@pytest.mark.parametrize(("name", "path"), SHIPPED)
def test_every_shipped_instance_validates_through_api_and_cli(name, path, capsys, empty_cache, offline):
    """As on a fresh clone (tests/conftest.py): no network, an empty cache, nothing beside the checkout."""
    validation = optfleet.validate(path)
    assert validation.loaded.kind.name == name
    assert validation.loaded.instance.spec.name in validation.text
    assert main(["validate", str(path), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body == json.loads(json.dumps(validation.to_dict())) and body["kind"] == name and body["valid"]


def _without_times(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with wall times and solver logs' times removed (they differ from run to run)."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in ("seconds", "time_s")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(rows)


def _comparable(rows: list[dict[str, Any]], others: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` without times; a row stopped by its time limit in either run (here or in ``others``) keeps only its
    method: where a time limit cuts a solve depends on the machine's load, so two runs may return different
    incumbents (heterogeneous_slo's hindsight MILP does under load)."""
    stopped = _stopped(rows, others)
    return [{"method": r["method"]} if r["method"] in stopped else r for r in _without_times(rows)]


def _stopped(*runs: list[dict[str, Any]]) -> set[str]:
    """The methods stopped by their time limit in any of the runs (the placement look-ahead: some window not
    proven optimal within its share of the limit)."""
    return {r["method"] for rows in runs for r in rows
            if r.get("status") == "time_limit" or r.get("windows_optimal", 0) < r.get("windows", 0)}


def _baselines(rows: list[dict[str, Any]], reference_stopped: bool) -> list[dict[str, Any]]:
    """Baseline rows without times; without their bound and gap when the exact row they are measured against was
    stopped by its time limit in either run (the bound is then that run's, which depends on the machine's load)."""
    if not reference_stopped:
        return _without_times(rows)
    return [{k: v for k, v in r.items() if k not in ("bound", "gap_pct")} for r in _without_times(rows)]


def _check_rows(rows: list[dict[str, Any]], references: list[dict[str, Any]]) -> None:
    for row in rows:
        assert list(row)[: len(CORE_COLUMNS)] == list(CORE_COLUMNS), list(row)
        assert isinstance(row["feasible"], bool) and isinstance(row["objective_unit"], str)
        no_finite_gap = row["bound"] == 0 and row["objective"] not in (0, None)
        assert (row["gap_pct"] is None) == (row["bound"] is None or not row["feasible"] or no_finite_gap), row
        for value in row.values():
            assert not (isinstance(value, float) and not math.isfinite(value))
    assert all("reason" in r and "bound" in r for r in references)


def _same_answer(name: str, path: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    solved = optfleet.solve(path).to_dict()
    code = main(["solve", str(path), "--json", "--quiet", "--out", str(tmp_path / "solve")])
    cli = json.loads(capsys.readouterr().out)
    assert code == (0 if any(r["status"] != "no_plan" for r in solved["results"]) else 1)
    assert _comparable(cli["results"], solved["results"]) == _comparable(solved["results"], cli["results"])
    stopped = bool(_stopped(cli["results"], solved["results"]))
    assert _baselines(cli["baselines"], stopped) == _baselines(solved["baselines"], stopped)
    assert json.loads((tmp_path / "solve" / "result.json").read_text())["method"] == solved["method"]
    _check_rows([*solved["results"], *solved["baselines"]], solved["references"])


@pytest.mark.parametrize("name", list(KINDS))
def test_api_and_cli_agree_on_the_smallest_instance(name, capsys, tmp_path):
    path = KIND_CASES[name]["small"]
    _same_answer(name, path, capsys, tmp_path)
    outcome = optfleet.run_gap(path)
    frame = optfleet.gap(path)
    assert list(frame.columns[: len(CORE_COLUMNS)]) == list(CORE_COLUMNS)
    assert main(["gap", str(path), "--json", "--quiet", "--out", str(tmp_path / "gap")]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert _without_times(cli["rows"]) == _without_times(outcome.to_dict()["rows"])
    assert len(frame) == len(cli["rows"]) and list(frame["method"]) == [r["method"] for r in cli["rows"]]
    _check_rows(cli["rows"], cli["references"])
    assert (tmp_path / "gap" / "gap.csv").read_text().splitlines()[0].startswith(",".join(CORE_COLUMNS))


STUDY_INSTANCES = {"month_ten_models"}
"""Shipped instances too large for a gap of every method (month_ten_models: the full MILP of 10 models x 720 hours);
benchmarks/bench_capacity_plan_study.py runs them through optfleet sweep."""


@pytest.mark.slow
@pytest.mark.parametrize(("name", "path"), [p for p in SHIPPED if p.values[1].stem not in STUDY_INSTANCES])
def test_api_and_cli_agree_on_every_shipped_instance(name, path, capsys, tmp_path):
    _same_answer(name, path, capsys, tmp_path)


BAD = [(name, field, value, text) for name in KINDS for field, value, text in KIND_CASES[name]["bad"]]


@pytest.mark.parametrize(("name", "field", "value", "text"), BAD, ids=[f"{b[0]}:{b[1]}" for b in BAD])
def test_bad_inputs_exit_2_naming_the_field_and_write_nothing(name, field, value, text, tmp_path, capsys):
    out = tmp_path / "out"
    setting = f"{field}={yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()}"
    assert main(["solve", str(KIND_CASES[name]["small"]), "--set", setting, "--json", "--out", str(out)]) == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and field.split(".")[0] in lines[0] and text in lines[0], lines
    assert captured.out == "" and not out.exists()
