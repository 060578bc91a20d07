"""The README stays true: its Python example runs and its quoted CLI lines match the code."""

from __future__ import annotations

import re

import yaml

from optfleet.cli import main

from support import FLEET_INSTANCES, REPO
import pytest

pytestmark = pytest.mark.solved

README = (REPO / "README.md").read_text()


def test_python_examples_run(monkeypatch):
    monkeypatch.chdir(REPO)
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_quick_start_is_two_commands_that_solve_and_test():
    first_block = re.search(r"```bash\n(.*?)```", README, flags=re.S).group(1).strip().splitlines()
    assert len(first_block) == 2
    assert "optfleet solve instances/fleet/azure_2023.yaml" in first_block[0]
    assert "pytest" in first_block[1]


def test_quoted_fleetsim_output_matches(capsys):
    assert main(["solve", str(FLEET_INSTANCES / "azure_2023.yaml"), "--preset", "fleetsim_compatible"]) == 0
    out = capsys.readouterr().out
    headline = next(line for line in out.splitlines() if line.startswith("sweep: B*"))
    assert headline in README


def _assert_quoted(text: str, captured: str) -> None:
    assert text in README, text
    assert text in captured, captured


def test_quoted_bad_input_message_is_real(tmp_path, capsys):
    data = yaml.safe_load((FLEET_INSTANCES / "toy.yaml").read_text())
    data["workload"]["rate_rps"] = 0
    path = tmp_path / "zero_rate.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["solve", str(path)]) == 2
    _assert_quoted("error: workload.rate_rps = 0: Input should be greater than 0", capsys.readouterr().err)


def test_quoted_infeasibility_message_is_real(capsys):
    assert main(["solve", str(FLEET_INSTANCES / "agent_heavy.yaml")]) == 1
    _assert_quoted(
        "infeasible: pool long (window 65536 tokens) needs P99 prefill 938.4 ms + one iteration 18.4 ms > SLO 500 ms",
        capsys.readouterr().out,
    )


def test_benchmark_tables_are_quoted_from_the_results_files():
    for name in ("sweep.md", "simulate.md", "milp.md", "heterogeneous.md", "caching_replay.md", "caching_lp.md", "startup.md", "reserved.md",
                 "studies.md", "engine_limits.md", "compress.md", "batching_fleets.md", "batching.md",
                 "batching_milp.md", "engine.md", "engine_simulated.md", "batching_engine.md", "measured_models.md", "peer_recommend.md"):
        table = [line for line in (REPO / "benchmarks" / "results" / name).read_text().splitlines() if line.startswith("|")]
        assert "\n".join(table) in README, f"README does not quote benchmarks/results/{name}"


def test_supported_versions_table_quotes_the_declared_lower_bounds():
    import tomllib

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    for requirement in declared:
        name, lower = (part.strip() for part in requirement.split(">=", 1))
        row = re.search(rf"^\s*\| {re.escape(name)} \| ([0-9.]+) \|", README, flags=re.M)
        assert row is not None, f"README's version table has no row for {name}"
        assert row.group(1).startswith(lower.split(",")[0]), (name, row.group(1), lower)
