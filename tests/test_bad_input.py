"""Every bad input the foundation issue lists: one clear line naming field and value, exit 2, nothing written."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from optfleet.cli import main
from optfleet.errors import EXIT_BAD_INPUT, EXIT_INFEASIBLE

from support import FLEET_INSTANCES

pytestmark = pytest.mark.unit

BASE: dict[str, Any] = yaml.safe_load((FLEET_INSTANCES / "toy.yaml").read_text())


def _with(path: str, value: Any) -> dict[str, Any]:
    """BASE with ``value`` at dotted ``path`` (None deletes the key)."""
    data = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node.setdefault(key, {})
    if value is None:
        node.pop(last, None)
    else:
        node[last] = value
    return data


def _solve(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, suffix: str = ".yaml") -> tuple[int, str]:
    instance = tmp_path / f"instance{suffix}"
    instance.write_text(text)
    out = tmp_path / "out"
    code = main(["solve", str(instance), "--out", str(out)])
    err = capsys.readouterr().err
    assert not out.exists(), "nothing may be written on bad input"
    return code, err


CASES = [
    ("unknown kind", _with("kind", "fleeet"), "kind", "fleeet"),
    ("missing required field", _with("workload.rate_rps", None), "workload.rate_rps", "required"),
    ("rate <= 0", _with("workload.rate_rps", 0), "workload.rate_rps", "0"),
    ("negative rate", _with("workload.rate_rps", -5), "workload.rate_rps", "-5"),
    ("SLO <= 0", _with("slo.ttft_p99_ms", 0), "slo.ttft_p99_ms", "0"),
    ("rho_max = 1", _with("slo.rho_max", 1.0), "slo.rho_max", "1.0"),
    ("rho_max <= 0", _with("slo.rho_max", 0), "slo.rho_max", "0"),
    ("non-monotone CDF", _with("workload.lengths.cdf", [[100, 0.5], [200, 0.4], [300, 1.0]]), "workload.lengths.cdf[1][1]", "0.4"),
    ("CDF above 1", _with("workload.lengths.cdf", [[100, 0.5], [200, 1.5]]), "workload.lengths.cdf[1][1]", "1.5"),
    ("CDF below 0", _with("workload.lengths.cdf", [[100, -0.1], [200, 1.0]]), "workload.lengths.cdf[0][1]", "-0.1"),
    ("CDF not ending at 1", _with("workload.lengths.cdf", [[100, 0.5], [200, 0.9]]), "workload.lengths.cdf[1][1]", "0.9"),
    ("empty CDF", _with("workload.lengths.cdf", []), "workload.lengths.cdf", "[]"),
    ("negative tokens", _with("workload.lengths.cdf", [[-100, 0.5], [200, 1.0]]), "workload.lengths.cdf[0][0]", "-100"),
    ("non-integer tokens", _with("workload.lengths.cdf", [[100.5, 0.5], [200, 1.0]]), "workload.lengths.cdf[0][0]", "100.5"),
    ("decreasing tokens", _with("workload.lengths.cdf", [[300, 0.5], [200, 1.0]]), "workload.lengths.cdf[1][0]", "200"),
    ("B <= 0", _with("pools.short_window_candidates", [0]), "pools.short_window_candidates[0]", "0"),
    ("B above the long window", _with("pools.short_window_candidates", [8000]), "pools.short_window_candidates[0]", "8000"),
    ("pool-routing B above the long window", _with("pools.pool_routing_boundary_tokens", 5000), "pools.pool_routing_boundary_tokens", "5000"),
    ("gamma < 1", _with("compression.gamma_max", 0.9), "compression.gamma_max", "0.9"),
    ("retrofit gamma < 1", _with("compression.retrofit_gamma", 0.5), "compression.retrofit_gamma", "0.5"),
    ("p_c above 1", _with("compression.compressible_fraction", 1.2), "compression.compressible_fraction", "1.2"),
    ("p_c below 0", _with("compression.compressible_fraction", -0.1), "compression.compressible_fraction", "-0.1"),
    ("unknown GPU", _with("hardware.gpu", "Z9000"), "hardware.gpu", "Z9000"),
    ("unknown model", _with("hardware.model", "Llama-9-1T"), "hardware.model", "Llama-9-1T"),
    ("unknown field (typo)", _with("slo.ttft_p99ms", 5), "slo.ttft_p99ms", "5"),
    ("unknown preset", _with("preset", "turbo"), "preset", "turbo"),
    ("unknown profile", _with("hardware.profile", "tpu"), "hardware.profile", "tpu"),
    ("long window missing from the slot table", _with("pools.long_window_tokens", 3000), "hardware.slots.table", "2000, 4000"),
    ("two length sources", _with("workload.lengths.cdf_file", "x.json"), "workload.lengths", "exactly one"),
    ("from_trace without a trace", _with("workload.split.rule", "from_trace"), "workload.split.rule", "from_trace"),
]


@pytest.mark.parametrize(("label", "data", "field", "value"), CASES, ids=[c[0] for c in CASES])
def test_bad_field_exits_2_naming_field_and_value(tmp_path, capsys, label, data, field, value):
    code, err = _solve(tmp_path, capsys, yaml.safe_dump(data))
    assert code == EXIT_BAD_INPUT
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert field in lines[0] and value in lines[0], lines[0]
    assert "Traceback" not in err


def test_model_that_does_not_fit_exits_2(tmp_path, capsys):
    data = _with("hardware.slots", {"from_memory": {"memory_utilisation": 0.9}})
    data["hardware"].update({"gpu": "A10G", "model": "Llama-3-70B"})
    code, err = _solve(tmp_path, capsys, yaml.safe_dump(data))
    assert code == EXIT_BAD_INPUT
    assert "hardware.model" in err and "Llama-3-70B" in err and "0 KV slots" in err


def test_requests_longer_than_the_long_window_exit_2(tmp_path, capsys):
    data = _with("pools.long_window_tokens", 3000)
    data["hardware"]["slots"] = {"table": {2000: 4, 3000: 3}}
    code, err = _solve(tmp_path, capsys, yaml.safe_dump(data))
    assert code == EXIT_BAD_INPUT
    assert "pools.long_window_tokens = 3000" in err and "4000 tokens" in err


def test_missing_file_exits_2(tmp_path, capsys):
    code = main(["solve", str(tmp_path / "nope.yaml")])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT and "nope.yaml" in err and "not found" in err


def test_malformed_yaml_exits_2(tmp_path, capsys):
    code, err = _solve(tmp_path, capsys, "kind: fleet\nworkload: [unclosed\n")
    assert code == EXIT_BAD_INPUT and "malformed YAML" in err


def test_malformed_json_exits_2(tmp_path, capsys):
    code, err = _solve(tmp_path, capsys, '{"kind": "fleet",', suffix=".json")
    assert code == EXIT_BAD_INPUT and "malformed JSON" in err


def test_json_instance_is_accepted(tmp_path, capsys):
    instance = tmp_path / "toy.json"
    instance.write_text(json.dumps(BASE))
    assert main(["solve", str(instance), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["results"][0]["gpus"] == 17


def test_missing_cdf_file_names_the_field(tmp_path, capsys):
    code, err = _solve(tmp_path, capsys, yaml.safe_dump(_with("workload.lengths", {"cdf_file": "absent.json"})))
    assert code == EXIT_BAD_INPUT and "workload.lengths.cdf_file" in err and "absent.json" in err


def test_bad_trace_row_names_the_row(tmp_path, capsys):
    (tmp_path / "trace.csv").write_text("l_in,l_out\n100,20\n-5,10\n")
    code, err = _solve(tmp_path, capsys, yaml.safe_dump(_with("workload.lengths", {"trace_file": "trace.csv"})))
    assert code == EXIT_BAD_INPUT and "l_in" in err and "row 3" in err and "-5" in err


def test_slo_below_prefill_exits_1_with_the_floor(tmp_path, capsys):
    instance = tmp_path / "tight.yaml"
    instance.write_text(yaml.safe_dump(_with("slo.ttft_p99_ms", 3.0)))
    code = main(["solve", str(instance), "--method", "homogeneous"])
    captured = capsys.readouterr()
    assert code == EXIT_INFEASIBLE
    assert "infeasible: pool long (window 4000 tokens) needs P99 prefill 3.0 ms + one iteration 1.0 ms > SLO 3 ms" in captured.out
