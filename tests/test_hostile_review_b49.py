"""Hostile prefix_cache TTFT models (review b49, Nov 28): a prefill time HiGHS cannot take in the hindsight MILP
ended with exit 3 ("HiGHS refused the arrays of model 'hindsight-prefix-cache'"), with or without the FCFS server.
Each case must now exit 2 with one stderr line naming the field, nothing on stdout and nothing written to --out.
The command runs in this process (``capfd`` holds what is printed to the file descriptors, by HiGHS too); one case
runs it as ``python -m optfleet`` in a process of its own (forked from tests/forked.py's server: no HiGHS yet)."""

from __future__ import annotations

import json
from pathlib import Path

import forked
import pytest
import yaml

from optfleet.cli import main

pytestmark = pytest.mark.unit

# 14 requests of three conversations, two arrivals at each instant (simultaneous arrivals under the server).
TRACE = [{"arrival_s": 0.01 * (i // 2), "input_tokens": 16 * n, "output_tokens": 5, "block_hashes": [100 * (i % 3) + j for j in range(n)]}
         for i, n in enumerate([2, 3, 6, 4, 5, 2, 6, 3, 4, 5, 6, 2, 3, 4])]


def instance(tmp_path: Path, **changes) -> Path:
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in TRACE))
    doc = {"kind": "prefix_cache", "name": "b49", "trace": {"file": "t.jsonl", "format": "generic", "block_tokens": 16},
           "capacity_blocks": [2, 4], "ttft": {"alpha_ms_per_token": 1.0, "beta_ms": 5.0}, "xi_ms": 20,
           "prefill_server": "fcfs", "objective": "tel"}
    ttft = changes.pop("ttft", {})
    doc["ttft"].update(ttft)
    doc.update(changes)
    path = tmp_path / "i.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def gap(path: Path, out: Path, capfd: pytest.CaptureFixture[str], own_process: bool = False) -> tuple[int, str, str]:
    """``optfleet gap PATH --out OUT``: its exit code, stdout and stderr."""
    argv = ["gap", str(path), "--out", str(out)]
    if own_process:  # a fresh process (tests/forked.py): no HiGHS yet
        done = forked.run(argv, Path.cwd())
        return done.returncode, done.stdout, done.stderr
    code = main(argv)
    captured = capfd.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("changes, field, own_process", [
    ({"ttft": {"alpha_ms_per_token": 1e12}}, "ttft.alpha_ms_per_token", True),
    ({"ttft": {"alpha_ms_per_token": 1e12}}, "ttft.alpha_ms_per_token", False),
    ({"ttft": {"alpha_ms_per_token": 1e270}}, "ttft.alpha_ms_per_token", False),
    ({"ttft": {"alpha_ms_per_token": 1e270}, "prefill_server": "none"}, "ttft.alpha_ms_per_token", False),
    ({"ttft": {"beta_ms": 1e270}}, "ttft.beta_ms", False),
    ({"ttft": {"beta_ms": 1e16}, "objective": "violations"}, "ttft.beta_ms", False),
], ids=["alpha-1e12-own-process", "alpha-1e12", "alpha-1e270", "alpha-1e270-no-server", "beta-1e270", "beta-1e16-violations"])
def test_a_prefill_time_highs_cannot_take_is_refused(tmp_path, capfd, changes, field, own_process):
    code, out, err = gap(instance(tmp_path, **changes), tmp_path / "out", capfd, own_process)
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith(f"error: {field} = ") and "Traceback" not in err, err
    assert out == "" and not (tmp_path / "out").exists()


@pytest.mark.parametrize("ttft", [{"alpha_ms_per_token": 1e8}, {"beta_ms": 5e10}], ids=["alpha-1e8", "beta-5e10"])
def test_a_large_prefill_time_under_the_limit_still_solves(tmp_path, capfd, ttft):
    """Below the limit the MILP solves (at alpha 6e13 HiGHS had reported this trace infeasible: exit 3)."""
    code, _, err = gap(instance(tmp_path, ttft=ttft), tmp_path / "out", capfd)
    assert code == 0, err
    assert (tmp_path / "out" / "gap.json").exists()
