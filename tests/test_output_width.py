"""Output that fits a terminal: every line the commands print for people fits 120 characters (tables hide their
least important columns and name them, prose wraps), ``--wide`` shows every hidden column, ``--json`` is untouched.

The shipped instances are solved once each (solve and gap through the API) and rendered at 120 characters and with
no width; the cheap ones run in the default tier, the rest (and those that read public data not shipped) in the
slow tier, as the conformance suite does (tests/test_conformance.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

import optfleet
from optfleet.cli import main
from optfleet.tables import DEFAULT_WIDTH, output_width

from support import REPO

pytestmark = pytest.mark.solved

INSTANCES = REPO / "instances"
# Solve and gap of these take a few seconds each; every other shipped instance is in the slow tier.
CHEAP = {"fleet/toy", "fleet/agent_heavy", "profiled/melange_example", "profiled/melange_availability", "profiled/melange_gpu_mix",
         "caching/tiny", "reserved/tiny", "routing/tiny", "placement/tiny", "capacity_plan/tiny"}
HIDDEN = re.compile(r"^\((\d+) columns? hidden to fit (\d+) characters: (.*); --wide shows every column\)$")


def _shipped(path: Path) -> object:
    key = f"{path.parent.name}/{path.stem}"
    return pytest.param(path, id=key, marks=[] if key in CHEAP else [pytest.mark.slow])


SHIPPED = [_shipped(p) for p in sorted(INSTANCES.glob("*/*.yaml")) if "kind" in yaml.safe_load(p.read_text())]


def _unwrapped(text: str) -> list[str]:
    """The lines of ``text`` with every wrapped continuation joined back (a hidden-columns line may wrap)."""
    lines: list[str] = []
    for line in text.splitlines():
        if lines and line.startswith("    ") and not lines[-1].endswith(")") and lines[-1].startswith("("):
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return lines


def hidden_columns(text: str) -> list[str]:
    """The headings every hidden-columns line of ``text`` names."""
    return [name for line in _unwrapped(text) if (m := HIDDEN.match(line)) for name in m[3].split(", ")]


@pytest.mark.parametrize("path", SHIPPED)
def test_every_line_of_solve_and_gap_fits_120_and_no_width_hides_nothing(path):
    for outcome in (optfleet.run_gap(path), optfleet.solve(path)):
        with output_width(DEFAULT_WIDTH):
            fitted = outcome.text()
        with output_width(None):
            whole = outcome.text()
        too_wide = [line for line in fitted.splitlines() if len(line) > DEFAULT_WIDTH]
        assert not too_wide, too_wide
        assert hidden_columns(whole) == [] and "--wide shows" not in whole
        for heading in hidden_columns(fitted):
            assert heading in whole, heading


def test_wide_shows_the_columns_a_table_hides_at_120_and_json_is_unchanged(capsys):
    toy = str(INSTANCES / "fleet" / "toy.yaml")
    assert main(["solve", toy, "--quiet"]) == 0
    fitted = capsys.readouterr().out
    hidden = hidden_columns(fitted)
    assert hidden and all(len(line) <= 120 for line in fitted.splitlines())
    assert main(["solve", toy, "--quiet", "--wide"]) == 0
    wide = capsys.readouterr().out
    pool_header = next(line for line in wide.splitlines() if line.startswith("pool "))
    assert all(heading in pool_header for heading in hidden) and len(pool_header) > 120
    assert "hidden" not in wide
    assert main(["solve", toy, "--quiet", "--json"]) == 0
    narrow_json = json.loads(capsys.readouterr().out)
    assert main(["solve", toy, "--quiet", "--json", "--wide"]) == 0
    assert _no_times(json.loads(capsys.readouterr().out)) == _no_times(narrow_json)


def _no_times(value: object) -> object:
    """``value`` without wall times (they differ from run to run)."""
    if isinstance(value, dict):
        return {k: _no_times(v) for k, v in value.items() if k not in ("seconds", "time_s", "log")}
    if isinstance(value, list):
        return [_no_times(v) for v in value]
    return value


@pytest.mark.parametrize("command", [
    ["validate", "instances/fleet/azure_2023_catalog.yaml"],
    ["catalog"],
    ["simulate", "instances/fleet/toy.yaml", "--requests", "2000", "--reps", "2", "--mode", "batching", "--quiet"],
], ids=["validate", "catalog", "simulate"])
def test_the_other_commands_fit_120_and_wide_leaves_lines_whole(command, capsys, monkeypatch):
    """Each of these prints a line or a table wider than 120 characters unfitted: fitted, every line fits; with
    ``--wide`` the same words come out on fewer, longer lines and every hidden column is back."""
    monkeypatch.chdir(REPO)
    main(command)
    fitted = capsys.readouterr().out
    assert fitted and all(len(line) <= 120 for line in fitted.splitlines()), max(fitted.splitlines(), key=len)
    main([*command, "--wide"])
    wide = capsys.readouterr().out
    assert hidden_columns(wide) == [] and max(len(line) for line in wide.splitlines()) > 120
    assert len(wide.splitlines()) < len(fitted.splitlines())
    for heading in hidden_columns(fitted):
        assert heading in wide


def test_a_sweeps_table_fits_120(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    main(["sweep", "instances/fleet/toy.yaml", "--set", "workload.rate_rps=50,100", "--set", "slo.ttft_p99_ms=1,10000", "--set",
          "hardware.iteration.chunk_tokens=512,1000", "--methods", "sweep,homogeneous,pool-routing", "--engine", "serial", "--quiet"])
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("rate_rps"))
    assert all(len(line) <= 120 for line in out.splitlines()) and "ttft_p99_ms" in header and "objective $/h" in header
    assert "scenarios of workload.rate_rps, slo.ttft_p99_ms, hardware.iteration.chunk_tokens" in " ".join(out.split())


def test_no_count_in_any_cheap_report_is_in_exponent_notation():
    for path in (INSTANCES / "routing" / "tiny.yaml", INSTANCES / "reserved" / "tiny.yaml", INSTANCES / "fleet" / "toy.yaml"):
        text = optfleet.run_gap(path).text()
        assert not re.search(r"\d[eE][+-]\d", text), path
