"""The result record every optfleet solve returns: status, incumbent, bound, gap, time, log."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from optfleet.numbers import duration, relative_gap_text, significant

OPTIMAL = "optimal"
TIME_LIMIT = "time_limit"
INFEASIBLE = "infeasible"
UNBOUNDED = "unbounded"
INFEASIBLE_OR_UNBOUNDED = "infeasible_or_unbounded"
ERROR = "error"
UNPROVEN = "unproven"  # a plan whose gap to the proven bound is beyond the MIP gap (a solver's loose "optimal", or a relaxation's bound)


@dataclass(frozen=True)
class SolveReport:
    """What a solver said, never just a number.

    ``objective`` is the incumbent (None without a feasible solution),
    ``bound`` the best proven bound, ``gap`` the relative gap
    ``|objective - bound| / max(|objective|, 1e-10)`` (an optimal run stops within the
    requested MIP gap, so its gap is at most that; 0 when there is no bound to compare).
    ``log`` is what the solver printed (its console output and its log, for people);
    ``counts`` is what optfleet counted itself, for programs and tests that must not
    depend on a solver's wording: ``solver_runs`` (runs of the solver), ``mip_starts``
    and ``feasible_mip_starts`` (starts handed to it, and those optfleet checked meet
    every row and bound), and for a case-by-case solve ``cases``, ``lp_relaxations``,
    ``case_solves``, ``empty_cases`` and ``cases_left`` (unsolved when it ended).
    """

    status: str
    objective: float | None
    bound: float | None
    gap: float | None
    seconds: float
    solver: str
    log: str = ""
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def has_solution(self) -> bool:
        return self.objective is not None

    @property
    def proven_optimal(self) -> bool:
        return self.status == OPTIMAL

    @property
    def summary(self) -> str:
        """One line for people, e.g. ``optimal, objective 249.73, bound 249.73, gap 0 %, 0.21 s`` (numbers as
        optfleet.numbers prints them: no exponent, a gap of solver round-off as 0)."""
        if self.proven_optimal:
            head = "optimal"
        elif self.has_solution and self.status == UNPROVEN:
            head = "not proven optimal (a gap to the bound remains)"
        elif self.has_solution:
            head = f"not proven optimal ({self.status.replace('_', ' ')} reached)"
        else:
            head = f"no solution ({self.status.replace('_', ' ')})"
        parts = [head]
        if self.objective is not None:
            parts.append(f"objective {significant(self.objective, 6)}")
        if self.bound is not None:
            parts.append(f"bound {significant(self.bound, 6)}")
        if self.gap is not None:
            parts.append(f"gap {relative_gap_text(self.gap)}")
        parts.append(duration(self.seconds))
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("log")
        data["proven_optimal"] = self.proven_optimal
        return data


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """``|objective - bound| / max(|objective|, 1e-10)``; None when either is missing."""
    if objective is None or bound is None:
        return None
    return abs(objective - bound) / max(abs(objective), 1e-10)


class FromSolveReport:
    """Status, objective, bound, gap and seconds read from the record's ``report`` (a :class:`SolveReport`): result
    records that carry more than the report (a schedule, a plan) hold one instead of copying its fields."""

    report: SolveReport

    @property
    def status(self) -> str:
        return self.report.status

    @property
    def objective(self) -> float:
        return float(self.report.objective)

    @property
    def bound(self) -> float | None:
        return self.report.bound

    @property
    def gap(self) -> float | None:
        return self.report.gap

    @property
    def seconds(self) -> float:
        return self.report.seconds
