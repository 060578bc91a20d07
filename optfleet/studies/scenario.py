"""One scenario of a study: the base instance with the scenario's overrides, its methods run by the API's gap.

What runs on a worker (a pool process or a Dask worker): it returns rows, never
raises, so one failing scenario is a row with its error and the study goes on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from optfleet import api
from optfleet.errors import InfeasibleError, InputError
from optfleet.instance.loader import LoadedInstance
from optfleet.results import CORE_COLUMNS
from optfleet.studies.overrides import Scenario, keywords

# Statuses of a scenario's rows when it could not be solved (the ``error`` column says why).
BAD_INPUT = "bad_input"  # a value the schema accepts but preparing the instance refuses (a cross-field check)
INFEASIBLE = "infeasible"  # the kind proved there is no plan before any method ran
INTERNAL_ERROR = "internal_error"  # a bug: please report it with the scenario's overrides
FAILED_STATUSES = (BAD_INPUT, INFEASIBLE, INTERNAL_ERROR)


def solve_scenario(base: LoadedInstance, scenario: Scenario, methods: Sequence[str]) -> list[dict[str, Any]]:
    """The gap rows of ``methods`` on ``base`` with ``scenario``'s overrides (core columns first, then the kind's,
    then ``error``, empty); a scenario that cannot be solved gives one row per method with a failed status and
    the error."""
    try:
        outcome = api.run_gap(base, list(methods), **keywords(scenario))
    except InputError as exc:
        return _failed(methods, BAD_INPUT, str(exc))
    except InfeasibleError as exc:
        return _failed(methods, INFEASIBLE, str(exc))
    except Exception as exc:  # noqa: BLE001 - a study outlives one scenario's bug; the row names it
        return _failed(methods, INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
    return [{**row, "error": None} for row in outcome.rows]


def solve_batch(base: LoadedInstance, batch: Sequence[tuple[int, Scenario]], methods: Sequence[str]) -> list[tuple[int, list[dict[str, Any]]]]:
    """:func:`solve_scenario` for each ``(index, scenario)`` of ``batch``, with its index: one task of a pool or a cluster."""
    return [(index, solve_scenario(base, scenario, methods)) for index, scenario in batch]


def _failed(methods: Sequence[str], status: str, message: str) -> list[dict[str, Any]]:
    return [{**dict.fromkeys(CORE_COLUMNS), "method": method, "status": status, "feasible": False, "error": message} for method in methods]
