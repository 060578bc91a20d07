"""Shared paths and helpers for the test suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from optfleet.problems.fleet.problem import FleetProblem, prepare
from optfleet.instance import load_instance

REPO = Path(__file__).resolve().parents[1]
FLEET_INSTANCES = REPO / "instances" / "fleet"
SHARED_DATA = REPO.parent / "shared" / "data"
PAPER_WORKLOADS = ("azure_2023", "lmsys_multiturn", "agent_heavy")

DOCS = REPO / "docs"
GENERATED_DOCS = ("_build/", "auto_examples/", "reference/instance-files/", "reference/cli.md")


def documentation_pages() -> list[Path]:
    """The README and every written page of docs/ (the pages the build generates left out)."""
    pages = sorted(p for p in DOCS.rglob("*.md") if not any(str(p.relative_to(DOCS)).startswith(g) for g in GENERATED_DOCS))
    return [REPO / "README.md", *pages]


def documentation_text() -> str:
    """What a user reads: the README and the documentation's pages, one text."""
    return "\n\n".join(page.read_text() for page in documentation_pages())


def prose(text: str) -> str:
    """``text`` with every run of whitespace made one space: the words of a report whatever its width wrapped (a long
    line for people wraps at 120 characters, optfleet/tables.py)."""
    return " ".join(text.split())


needs_shared_data = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data is not beside the checkout")


def fleet_problem(name: str, preset: str | None = None) -> FleetProblem:
    """The prepared FleetProblem of a shipped instance ``instances/fleet/<name>.yaml``."""
    return prepare(load_instance(FLEET_INSTANCES / f"{name}.yaml", preset=preset))


def explain_objectives(path: Path, parameter: str, values: list[float]) -> list[float | None]:
    """The kind's exact optimum (``optfleet explain``'s solve) of the instance at ``path`` with ``parameter`` at each of
    ``values``: the points of a curve, for monotonicity checks."""
    from optfleet import api
    from optfleet.sensitivity.api import explainer_of

    loaded = api.load(path)
    explainer = explainer_of(loaded)
    subject = loaded.problem if explainer.subject is None else explainer.subject
    varied = explainer.parameters[parameter]
    return [explainer.solve(varied.apply(subject, value)).objective for value in values]


def assert_explain_refuses(path: Path, args: list[str], option: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``optfleet explain`` on ``path`` with ``args`` exits 2 naming ``option``, printing nothing on stdout."""
    from optfleet.cli import main
    from optfleet.errors import EXIT_BAD_INPUT

    assert main(["explain", str(path), "--quiet", "--no-alternatives", *args]) == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    assert option in captured.err and captured.out == ""
