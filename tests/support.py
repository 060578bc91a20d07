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


AZURE_TRACE_FILES = [str(SHARED_DATA / "azure_llm_2023" / f"AzureLLMInferenceTrace_{part}.csv") for part in ("code", "conv")]


# Shipped instances that read the public Azure 2023 trace (not shipped) -> the field naming its files.
AZURE_TRACE_FIELDS = {"azure_2023_trace": "workload.lengths.trace_file", "azure_2023_flash": "trace.file"}


def data_overrides(name: str) -> dict:
    """Overrides that point an instance needing public data (not shipped) at the team's copy beside the checkout."""
    field = AZURE_TRACE_FIELDS.get(name)
    return {field.replace(".", "__"): AZURE_TRACE_FILES} if field else {}


def cli_data_overrides(name: str) -> list[str]:
    """:func:`data_overrides` as the CLI's ``--set`` options."""
    field = AZURE_TRACE_FIELDS.get(name)
    return ["--set", f"{field}=[{','.join(AZURE_TRACE_FILES)}]"] if field else []


def fleet_problem(name: str, preset: str | None = None) -> FleetProblem:
    """The prepared FleetProblem of a shipped instance ``instances/fleet/<name>.yaml``."""
    return prepare(load_instance(FLEET_INSTANCES / f"{name}.yaml", preset=preset, **data_overrides(name)))
