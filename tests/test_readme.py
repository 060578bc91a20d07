"""The README and the documentation stay true: their Python examples run and their quoted CLI lines match the code."""

from __future__ import annotations

import re

import yaml

from optfleet.cli import main

from support import FLEET_INSTANCES, REPO, documentation_pages, documentation_text, prose
from test_docs import TUTORIAL
import pytest

pytestmark = pytest.mark.solved

README = (REPO / "README.md").read_text()
DOCS_TEXT = documentation_text()


def test_python_examples_run(monkeypatch):
    monkeypatch.chdir(REPO)
    ran = 0
    for page in documentation_pages():
        if page.name in TUTORIAL:
            continue  # run in the tutorial's own folder by tests/test_docs.py
        for block in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S):
            exec(compile(block, str(page.relative_to(REPO)), "exec"), {})
            ran += 1
    assert ran >= 2


def test_quick_start_is_two_commands_the_first_with_the_core_only():
    first_block = re.search(r"```bash\n(.*?)```", README, flags=re.S).group(1).strip().splitlines()
    assert len(first_block) == 2
    assert "pip install -e . &&" in first_block[0] and "[" not in first_block[0]  # no extra
    assert "optfleet solve instances/fleet/azure_2023.yaml" in first_block[0]
    assert "'.[test]'" in first_block[1] and "pytest" in first_block[1]
    ci = (REPO / ".ci" / "run").read_text()  # runs the same commands (pip quietly)
    for command in first_block:
        for part in command.split("&&"):
            assert part.strip().replace("pip install -e", "pip install -q -e").replace(".venv/bin/python -m pytest", "run_tests .venv/bin/python") in ci, part


def test_the_readme_is_short():
    assert len(README.splitlines()) <= 150


def test_quoted_fleetsim_output_matches(capsys):
    assert main(["solve", str(FLEET_INSTANCES / "azure_2023.yaml"), "--preset", "fleetsim_compatible"]) == 0
    out = capsys.readouterr().out
    headline = next(line for line in out.splitlines() if line.startswith("sweep: B*"))
    assert headline in DOCS_TEXT


def _assert_quoted(text: str, captured: str) -> None:
    """``text`` is quoted in the documentation and is what the command printed (its words, wherever the output
    wrapped at 120 columns)."""
    assert text in DOCS_TEXT, text
    assert text in prose(captured), captured


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
    for name in ("sweep.md", "simulate.md", "milp.md", "milp_moments.md", "heterogeneous.md", "caching_replay.md", "caching_lp.md", "startup.md", "reserved.md",
                 "studies.md", "engine_limits.md", "compress.md", "batching_fleets.md", "batching.md",
                 "batching_milp.md", "batching_milp_gap_parts.md", "batching_milp_engine.md", "engine.md", "engine_simulated.md", "batching_engine.md", "batching_engine_long_prompts.md", "measured_models.md", "peer_recommend.md"):
        table = [line for line in (REPO / "benchmarks" / "results" / name).read_text().splitlines() if line.startswith("|")]
        assert "\n".join(table) in DOCS_TEXT, f"the docs do not quote benchmarks/results/{name}"


def test_supported_versions_table_quotes_the_declared_lower_bounds():
    import tomllib

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    for requirement in declared:
        name, lower = (part.strip() for part in requirement.split(">=", 1))
        row = re.search(rf"^\s*\| {re.escape(name)} \| ([0-9.]+) \|", DOCS_TEXT, flags=re.M)
        assert row is not None, f"the docs' version table has no row for {name}"
        assert row.group(1).startswith(lower.split(",")[0]), (name, row.group(1), lower)
