"""Hostile spot availability traces for a capacity plan (review a49): each is refused with exit 2 naming the
trace's field, writes nothing and shows no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from optfleet.cli import main

TINY = Path(__file__).resolve().parents[1] / "instances" / "capacity_plan" / "tiny.yaml"


def _instance(tmp_path: Path, trace_text: str) -> Path:
    spec = yaml.safe_load(TINY.read_text())
    spec["gpus"][1]["spot"] = {"price_per_gpu_hour": 1.5, "preemption_probability": 0.1, "confidence": 0.9,
                               "availability_trace": {"file": "trace.json", "values": "available_instances"}}
    (tmp_path / "trace.json").write_text(trace_text)
    path = tmp_path / "held.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.parametrize(("trace_text", "field", "says"), [
    (json.dumps({"metadata": {"gap_seconds": 1e-300}, "data": [1]}), "availability_trace.file", "the horizon needs 24 h"),
    (json.dumps({"metadata": {"gap_seconds": 300}, "data": [10**23] + [3] * 300}), "availability_trace.file:data[0]",
     "above the 4096 instances"),
    ("[" * 100_000 + "]" * 100_000, "availability_trace.file", "nests too deeply"),
], ids=["gap_seconds_1e-300", "value_10e23", "nested_100000_deep"])
def test_hostile_spot_trace_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], trace_text: str, field: str,
                                        says: str) -> None:
    path = _instance(tmp_path, trace_text)
    out = tmp_path / "out"
    code = main(["solve", str(path), "--out", str(out)])
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert code == 2, text
    assert f"gpus[1].spot.{field}" in text and says in text, text
    assert "Traceback" not in text
    assert not out.exists()
