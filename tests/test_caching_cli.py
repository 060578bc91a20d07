"""``optfleet gap`` and ``optfleet validate`` on caching instances, and every bad input through the CLI."""

from __future__ import annotations

import copy
import csv
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import optfleet
from optfleet.cli import main
from optfleet.errors import EXIT_BAD_INPUT

from support import REPO

pytestmark = pytest.mark.solved

CACHING = REPO / "instances" / "caching"
TINY = CACHING / "tiny.yaml"
TINY_CSV = (CACHING / "tiny.csv").read_text()
BASE: dict[str, Any] = yaml.safe_load(TINY.read_text())


def test_gap_prints_one_table_per_capacity_with_the_optimum(capsys):
    assert main(["gap", str(TINY)]) == 0
    out = capsys.readouterr().out
    assert "instance tiny: 5 turns in 3 conversations" in out
    assert out.count("hindsight LP: optimal, objective") == 2
    assert "capacity 100 tokens (6.25 blocks of 16); hindsight LP: optimal, objective 10.0 ms, bound 10.0 ms" in out
    header = next(line for line in out.splitlines() if line.startswith("method "))
    lru_line = next(line for line in out.splitlines() if line.strip().startswith("lru "))
    # the core columns: status, feasible, objective (TEL, its unit in the heading), bound, gap % to the optimum's 10 ms
    assert header.split()[:8] == ["method", "status", "feasible", "objective", "TEL", "ms", "bound", "TEL"]
    assert lru_line.split()[1:6] == ["heuristic", "yes", "110", "10", "1,000.00"]


def test_gap_json_has_every_policy_at_every_capacity(capsys):
    assert main(["gap", str(TINY), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "caching" and data["safe_uncached_tokens"] == 50.0
    assert {(r["capacity_tokens"], r["bound"]) for r in data["references"]} == {(100, 10.0), (200, 0.0)}
    c100 = [r for r in data["rows"] if r["capacity_tokens"] == 100]
    optimum = next(r for r in c100 if r["method"] == "optimum")
    assert optimum["status"] == "optimal" and optimum["objective"] == 10.0 and optimum["solver"]["bound"] == 10.0
    tel = {r["method"]: r["objective"] for r in c100}
    assert tel == {"lru": 110, "threshold-lru": 90, "t-lru": 94, "end-aware-t-lru": 12, "length-aware-t-lru": 92,
                   "et-lru": 80, "belady": 10, "optimum": 10}
    assert {r["method"]: r["violations"] for r in c100}["lru"] == 2
    gaps = {r["method"]: r["gap_pct"] for r in data["rows"] if r["capacity_tokens"] == 200}
    assert gaps["lru"] is None and gaps["belady"] == 0.0  # the optimum is 0 ms: LRU's 20 ms has no finite gap


def test_gap_out_writes_csv_and_json(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["gap", str(TINY), "--out", str(out), "--methods", "lru,belady,optimum"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["gap.csv", "gap.json"]
    rows = list(csv.DictReader((out / "gap.csv").open()))
    assert [(r["capacity_tokens"], r["method"]) for r in rows] == [
        ("100", "lru"), ("100", "belady"), ("100", "optimum"), ("200", "lru"), ("200", "belady"), ("200", "optimum")]
    assert rows[2]["status"] == "optimal"
    assert list(rows[0])[:8] == ["method", "status", "feasible", "objective", "objective_unit", "bound", "gap_pct", "seconds"]
    assert json.loads((out / "gap.json").read_text())["instance"] == "tiny"


def test_methods_option_takes_policy_labels_and_registered_names(capsys):
    assert main(["gap", str(TINY), "--json", "--methods", "threshold-lru,t-lru"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = [r for r in data["rows"] if r["capacity_tokens"] == 100]
    assert [r["method"] for r in rows] == ["threshold-lru", "t-lru"]
    assert rows[0]["objective"] == 90  # the instance's threshold-lru (50 tokens), selected by its label
    assert data["references"][0]["bound"] is None and rows[0]["gap_pct"] is None
    assert "no bound" in data["references"][0]["reason"]


def test_without_the_lp_gaps_refer_to_belady(capsys):
    assert main(["gap", str(TINY), "--json", "--methods", "lru,belady"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["references"][0]["reason"].startswith("Tail-Optimized Belady")
    assert data["rows"][0]["gap_pct"] == pytest.approx(1000.0)


def test_plot_writes_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "cdf.png"
    assert main(["gap", str(TINY), "--plot", str(png), "--methods", "lru,t-lru"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_exits_2_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    png, out = tmp_path / "cdf.png", tmp_path / "out"
    assert main(["gap", str(TINY), "--plot", str(png), "--out", str(out)]) == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    assert "--plot" in captured.err and "optfleet[plot]" in captured.err and captured.out == ""
    assert not png.exists() and not out.exists()


def test_validate_summarises_a_caching_instance(capsys):
    assert main(["validate", str(CACHING / "sharegpt_like.yaml")]) == 0
    out = capsys.readouterr().out
    assert "valid caching instance 'sharegpt-like'" in out
    assert "5,000 conversations" in out and "mean 3.5 turns, mean gap 0.3333 s" in out
    assert "800 uncached tokens within xi" in out and "t-lru-q220" in out


@pytest.mark.parametrize("name", ["sharegpt_like", "sharegpt_like_overlap"])
def test_shipped_generated_instances_validate(name, capsys):
    assert main(["validate", str(CACHING / f"{name}.yaml")]) == 0


def test_a_generated_trace_runs_end_to_end(tmp_path, capsys):
    assert _run(tmp_path, _with(trace={"generator": GENERATOR}), TINY_CSV, extra=["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["trace"]["conversations"] == 10 and data["trace"]["source"].startswith("generator (seed 1")
    for reference in data["references"]:
        rows = [r for r in data["rows"] if r["capacity_tokens"] == reference["capacity_tokens"]]
        assert next(r for r in rows if r["method"] == "optimum")["solver"]["proven_optimal"]
        assert all(r["objective"] >= reference["bound"] - 1e-9 for r in rows)


def test_sharegpt_like_optimum_is_proven_and_bounds_every_policy():
    """The shipped instance at 4,000 tokens: the LP is proven optimal, Belady reaches it, no policy beats it."""
    frame = optfleet.gap(CACHING / "sharegpt_like.yaml", capacity_tokens=[4000])
    (reference,) = frame.attrs["references"]
    assert reference["reason"] == "the hindsight optimum"
    tel = dict(zip(frame["method"], frame["objective"], strict=True))
    assert frame.set_index("method").loc["optimum", "status"] == "optimal"
    assert tel["belady"] == pytest.approx(tel["optimum"], rel=1e-9) and reference["bound"] == tel["optimum"]
    assert all(value >= tel["optimum"] - 1e-6 for value in tel.values())
    assert tel["length-aware-t-lru"] <= tel["lru"]


def test_capacity_in_blocks(tmp_path, capsys):
    data = {**copy.deepcopy(BASE), "capacity_blocks": [4], "block_tokens": 25}
    del data["capacity_tokens"]
    code = _run(tmp_path, data, TINY_CSV, extra=["--json", "--methods", "lru"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["rows"][0]["capacity_tokens"] == 100


# ---------------------------------------------------------------- bad input: exit 2, one line, nothing written


def _run(tmp_path: Path, data: dict[str, Any], trace_text: str, extra: list[str] | None = None) -> int:
    (tmp_path / "tiny.csv").write_text(trace_text)
    instance = tmp_path / "instance.yaml"
    instance.write_text(yaml.safe_dump(data))
    return main(["gap", str(instance), *(extra or [])])


def _with(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


GENERATOR = {"seed": 1, "conversations": 10, "conversation_rate_per_s": 1, "mean_turns": 2, "mean_gap_s": 1,
             "prompt_tokens": {"distribution": "constant", "mean_tokens": 5}, "answer_tokens": {"distribution": "geometric", "mean_tokens": 5}}

BAD = [
    ("timestamps go back within a conversation", _with(), TINY_CSV.replace("A,3,40,20", "A,1.5,40,20").replace("A,0,30,30", "A,2.5,30,30"), [], "trace.t", "goes back in time"),
    ("negative prompt length", _with(), TINY_CSV.replace("B,1,40,40", "B,1,-40,40"), [], "trace.q", "-40"),
    ("negative answer length", _with(), TINY_CSV.replace("C,2,20,20", "C,2,20,-1"), [], "trace.a", "-1"),
    ("empty trace", _with(), "conversation_id,t,q,a\n", [], "trace", "no turns"),
    ("trace file missing", _with(trace={"file": "nope.csv"}), TINY_CSV, [], "trace.file", "file not found"),
    ("capacity 0", _with(capacity_tokens=[100, 0]), TINY_CSV, [], "capacity_tokens.1", "0"),
    ("negative capacity", _with(capacity_tokens=-5), TINY_CSV, [], "capacity_tokens.0", "-5"),
    ("capacity in blocks 0", _with(capacity_tokens=None, capacity_blocks=0), TINY_CSV, [], "capacity_blocks.0", "0"),
    ("no capacity", _with(capacity_tokens=None), TINY_CSV, [], "capacity_tokens", "exactly one"),
    ("xi < 0", _with(xi_ms=-1), TINY_CSV, [], "xi_ms", "-1"),
    ("alpha <= 0", _with(ttft={"alpha_ms_per_token": 0}), TINY_CSV, [], "ttft.alpha_ms_per_token", "0"),
    ("unknown policy in the instance", _with(policies=["lru", "mru"]), TINY_CSV, [], "policies.1", "mru"),
    ("unknown policy option", _with(), TINY_CSV, ["--methods", "lru,mru"], "--methods", "mru"),
    ("bad policy parameter", _with(policies=[{"name": "threshold-lru", "threshold_tokens": -3}]), TINY_CSV, [], "policies.0.threshold-lru.threshold_tokens", "-3"),
    ("repeated policy label", _with(policies=["lru", "lru"]), TINY_CSV, [], "policies", "unique"),
    ("unknown field", _with(xi=50), TINY_CSV, [], "xi", "50"),
    ("trace file and generator", _with(trace={"file": "tiny.csv", "generator": GENERATOR}), TINY_CSV, [], "trace", "exactly one"),
    ("generator with both parametrisations", _with(trace={"generator": {**GENERATOR, "turn_rate_per_s": 1}}), TINY_CSV, [], "trace.generator", "either"),
    ("generator length without a mean", _with(trace={"generator": {**GENERATOR, "prompt_tokens": {"distribution": "lognormal"}}}),
     TINY_CSV, [], "trace.generator.prompt_tokens", "mean_tokens"),
    ("generator without conversations", _with(trace={"generator": {**GENERATOR, "conversations": 0}}), TINY_CSV, [], "trace.generator.conversations", "0"),
    ("a fleet method on a caching instance", _with(), TINY_CSV, ["--methods", "sweep"], "--methods", "sweep"),
    ("--preset on a caching instance", _with(), TINY_CSV, ["--preset", "paper"], "preset (--preset)", "paper"),
]


@pytest.mark.parametrize(("label", "data", "trace_text", "extra", "field", "value"), BAD, ids=[b[0] for b in BAD])
def test_bad_caching_input_exits_2_naming_field_and_value(tmp_path, capsys, label, data, trace_text, extra, field, value):
    out = tmp_path / "out"
    png = tmp_path / "plot.png"
    code = _run(tmp_path, data, trace_text, [*extra, "--out", str(out), "--json"])
    captured = capsys.readouterr()
    assert code == EXIT_BAD_INPUT, captured
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field} = "), lines
    assert value in lines[0]
    assert captured.out == "" and not out.exists() and not png.exists()


def test_plot_is_refused_for_fleet_instances(tmp_path, capsys):
    fleet = str(REPO / "instances" / "fleet" / "toy.yaml")
    assert main(["gap", fleet, "--plot", str(tmp_path / "x.png")]) == EXIT_BAD_INPUT
    assert "kind fleet has no plot" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()
