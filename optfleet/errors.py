"""Exception types shared by every optfleet layer.

The CLI maps them to exit codes: :class:`InputError` -> 2 (bad input, nothing
written), :class:`InfeasibleError` -> 1 (a valid instance with no feasible
plan); anything else is an internal error -> 3.  Both carry one human-readable line; neither should ever surface
as a traceback.
"""

from __future__ import annotations

import reprlib
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
        super().__init__(f"{field} = {short_repr(value)}: {problem}")


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 160
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 8
_REPR.maxlevel = 2


MAX_VALUE_CHARS = 200


def short_repr(value: Any) -> str:
    """``repr(value)`` cut to a line: a message never spells out a huge value (an expanded YAML alias bomb, a trace).
    A numpy scalar shows the Python value it holds (``-5``, not ``np.int64(-5)``): the value as written."""
    if type(value).__module__ == "numpy" and callable(getattr(value, "item", None)) and getattr(value, "ndim", None) == 0:
        value = value.item()
    text = _REPR.repr(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 3] + "..."


class InfeasibleError(OptfleetError):
    """A valid problem with no feasible plan; the message says which term binds."""


class NoPlanFoundError(InfeasibleError):
    """A method stopped without a plan that passes the evaluator, with no proof that none exists (its approximate
    tables' refreshes ran out); the message says so.  ``report``, when given, is a solver's report whose bound holds."""

    def __init__(self, message: str, report: Any = None) -> None:
        super().__init__(message)
        self.report = report


class NoPlanInTimeError(NoPlanFoundError):
    """The solver's time limit passed before it found any plan (or before the model was built: optfleet.models.clock):
    not proven infeasible.  The message gives the limit and the lower bound proven by then; ``report`` is the
    solver's report (its bound holds), None when the build ran out of time."""


class NotApplicableError(InputError):
    """A method that does not apply to this (valid) instance, e.g. the fleet MILP under the ``fleetsim`` TTFT
    rule.  Asked for by name it is bad input (exit 2); in a comparison it is a row saying why."""
