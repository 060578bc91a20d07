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

needs_shared_data = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data is not beside the checkout")


def fleet_problem(name: str, preset: str | None = None) -> FleetProblem:
    """The prepared FleetProblem of a shipped instance ``instances/fleet/<name>.yaml``."""
    return prepare(load_instance(FLEET_INSTANCES / f"{name}.yaml", preset=preset))
