"""Exception types shared by every optfleet layer.

The CLI maps them to exit codes: :class:`InputError` -> 2 (bad input, nothing
written), :class:`InfeasibleError` -> 1 (a valid instance with no feasible
plan); anything else is an internal error -> 3.  Both carry one human-readable line; neither should ever surface as a
traceback.
"""

from __future__ import annotations

from typing import Any

EXIT_OK = 0
EXIT_INFEASIBLE = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3


class OptfleetError(Exception):
    """Base class of every error optfleet raises on purpose."""


class InputError(OptfleetError, ValueError):
    """Bad input: names the offending field path and value.

    ``InputError("workload.rate_rps", -1, "must be > 0")`` renders as
    ``workload.rate_rps = -1: must be > 0``.
    """

    def __init__(self, field: str, value: Any, problem: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        super().__init__(f"{field} = {value!r}: {problem}")


class InfeasibleError(OptfleetError):
    """A valid problem with no feasible plan; the message says which term binds."""


class NoPlanInTimeError(InfeasibleError):
    """The solver's time limit passed before it found any plan: not proven infeasible.  The message
    gives the limit and the lower bound proven by then."""


class NotApplicableError(InputError):
    """A method that does not apply to this (valid) instance, e.g. the fleet MILP under the ``fleetsim`` TTFT
    rule.  Asked for by name it is bad input (exit 2); in a comparison it is a row saying why."""
