"""The spill limit designed by replay: for the threshold design's rule and GPU configurations (design_milp.py), the
queue limit of ``design.queue_limits`` and the pools' instance counts of least fleet cost whose replay meets the
SLO and epsilon.

Spillover changes what the static design (design.py) scores: a burst in one pool moves to the other, so each pool
may be sized below its M/G/c count; and a request the dispatcher sent long because its estimate lies in
``(B, C]`` may spill short and be mis-routed there (its true budget above ``C``).  Neither has a closed form, so
each fleet tried is replayed: the stream is calibrated, dispatched and spilled on that fleet's live slot state
(replay.py, spill.py) and scored by the routing evaluator (evaluator.py).  A fleet *meets* the design when

* every pool's P99 TTFT (slot mode, from the warm-up cut) is within the fleet's SLO,
* the offered load stays within ``rho_max x slots`` in every capacity window (the evaluator's capacity rule),
* the replayed mis-route probability (spill-induced mis-routes included) is at most ``epsilon``,
* the fleet instance's constraints hold (the fleet's own plan checks).

For each queue limit (None: no spillover) the counts are searched from the static design's counts (a pool the
static design leaves empty, no request being routed there, stays empty and takes no spill): while the fleet does
not meet the design, every pool whose P99 TTFT or load breaks it doubles (up to ``GROWTH`` x its static count);
then the least short count at that long count (bisection), the least long count at that short count, and the
short count once more.  The search assumes that
meeting the design is monotone in each count; it is a heuristic search by simulation, not a model, so its rows
carry no bound, and a limit is compared with the others only on this stream and seed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from optfleet.problems.routing.design import DesignCandidate, constraint_violations, design_fleet
from optfleet.problems.routing.dispatcher import DispatchRule
from optfleet.problems.routing.evaluator import RoutingEvaluation, evaluate
from optfleet.problems.routing.problem import RoutingProblem
from optfleet.problems.routing.replay import replay_router
from optfleet.problems.routing.spill import SpillRule

DEFAULT_QUEUE_LIMITS: tuple[int | None, ...] = (None, 0, 4, 16, 64)
"""Queue limits tried when ``design.queue_limits`` is not given (None: no spillover)."""
GROWTH = 4
"""How far (a factor on the static counts) the search grows a fleet whose static counts do not meet the design."""


@dataclass(frozen=True)
class SpillDesign:
    """A queue limit and the fleet found for it: the design's rule and GPU configurations at ``instances``."""

    queue_limit: int | None
    design: DesignCandidate
    instances: tuple[int, int]

    def to_dict(self) -> dict[str, Any]:
        return {**self.design.to_dict(), "instances": list(self.instances), "queue_limit": self.queue_limit}


@dataclass(frozen=True)
class SpillOutcome:
    """A spill design replayed: the routing evaluator's scores, its fleet's cost and whether it meets the design
    (module docstring), with the reasons when it does not."""

    spill: SpillDesign
    evaluation: RoutingEvaluation
    cost_per_hour: float
    reasons: tuple[str, ...]
    failing_pools: tuple[int, ...] = ()

    @property
    def meets(self) -> bool:
        return not self.reasons


@dataclass(frozen=True)
class SpillSearch:
    """The spill design's answer: the cheapest outcome and every queue limit's."""

    best: SpillOutcome
    searched: tuple[SpillOutcome, ...]

    def to_dict(self) -> dict[str, Any]:
        return {**self.best.spill.to_dict(), "queue_limits_tried": [
            {"queue_limit": o.spill.queue_limit, "instances": list(o.spill.instances), "cost_per_hour": o.cost_per_hour, "meets": o.meets,
             "reasons": list(o.reasons)} for o in self.searched]}


def spill_problem(problem: RoutingProblem, spill: SpillDesign) -> RoutingProblem:
    """The routing problem with the design's rule, its fleet at ``spill.instances`` and the queue limit."""
    d = spill.design
    return replace(problem, plan=design_fleet(problem, d, spill.instances, "design_spill"),
                   rule=DispatchRule(d.b_short_tokens, d.short_window_tokens, d.gamma, problem.compressible),
                   spill=SpillRule(spill.queue_limit, None))


def replay_spill(problem: RoutingProblem, spill: SpillDesign) -> SpillOutcome:
    """Replay one spill design with the design's calibrator and score it (module docstring's rules)."""
    replayed = spill_problem(problem, spill)
    e = evaluate(replayed, replay_router(replayed, replayed.calibrators[problem.spec.design.calibrator]), needed=False)
    slo, eps = problem.fleet.ttft_p99_ms, problem.spec.design.epsilon
    cost = float(sum(p.cost_per_hour for p in e.pools))
    slow = [p.ttft_p99_ms is not None and p.ttft_p99_ms > slo for p in e.pools]
    reasons = [f"{p.name} P99 TTFT {p.ttft_p99_ms:.4g} ms > {slo:g} ms" for p, late in zip(e.pools, slow, strict=True) if late]
    if not e.capacity_ok:
        reasons.append(f"offered load above rho_max x slots in {e.overloaded_windows[0]} short / {e.overloaded_windows[1]} long windows")
    failing = tuple(p for p in (0, 1) if slow[p] or e.overloaded_windows[p] > 0)
    if e.misroutes > eps * e.requests + 1e-9:
        reasons.append(f"mis-route probability {100 * e.misroutes / e.requests:.3g} % > epsilon {100 * eps:.3g} %")
    reasons.extend(constraint_violations(problem, replayed.plan, cost))
    return SpillOutcome(spill, e, cost, tuple(reasons), failing)


def least_count(meets: Callable[[int], bool], start: int) -> int:
    """The least count ``n >= 1`` with ``meets(n)``, by bisection below ``start``, which meets it.  Assumes ``meets``
    is monotone."""
    lo, hi = 0, start
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if meets(mid) else (mid, hi)
    return hi


def search_limit(problem: RoutingProblem, design: DesignCandidate, queue_limit: int | None) -> SpillOutcome:
    """The module docstring's search for one queue limit: from the static counts, double every pool whose P99 TTFT
    or load breaks the design until the fleet meets it (at most ``GROWTH`` x the static counts), then shrink the
    pools one by one.  The least fleet found, or the last one tried when none meets the design (its reasons say
    why)."""
    outcomes: dict[tuple[int, int], SpillOutcome] = {}

    def outcome(instances: tuple[int, int]) -> SpillOutcome:
        if instances not in outcomes:
            outcomes[instances] = replay_spill(problem, SpillDesign(queue_limit, design, instances))
        return outcomes[instances]

    if design.instances is None:
        raise ValueError("the spill search starts from a design with instance counts (design_milp.solve_design's)")
    static = design.instances
    counts = list(static)
    tried = outcome(static)
    while not tried.meets:
        grow = [p for p in tried.failing_pools if 0 < counts[p] < GROWTH * static[p]]
        if not grow:
            return _with_plateaus(tried, outcome(static))
        for p in grow:
            counts[p] = min(2 * counts[p], GROWTH * static[p])
        tried = outcome((counts[0], counts[1]))
    for pool in (0, 1, 0):
        if counts[pool] == 0:
            continue
        if pool == 0:
            counts[0] = least_count(lambda n: outcome((n, counts[1])).meets, counts[0])
        else:
            counts[1] = least_count(lambda n: outcome((counts[0], n)).meets, counts[1])
    return outcome((counts[0], counts[1]))


def _with_plateaus(last: SpillOutcome, first: SpillOutcome) -> SpillOutcome:
    """``last`` (the search gave up there) with a reason for each pool whose P99 TTFT broke the SLO at the static
    counts ``first`` and did not fall (by 1 %) with more instances: growing that pool does not help, and the
    outcome says so rather than only that the search stopped."""
    notes = []
    for p, (now, then) in enumerate(zip(last.evaluation.pools, first.evaluation.pools, strict=True)):
        grown = last.spill.instances[p] > first.spill.instances[p]
        if grown and p in last.failing_pools and now.ttft_p99_ms is not None and then.ttft_p99_ms is not None \
                and now.ttft_p99_ms >= 0.99 * then.ttft_p99_ms:
            notes.append(f"{now.name} P99 TTFT {then.ttft_p99_ms:.4g} ms at {first.spill.instances[p]} instances and {now.ttft_p99_ms:.4g} ms at "
                         f"{last.spill.instances[p]}: more instances do not lower it")
    return replace(last, reasons=(*last.reasons, *notes)) if notes else last


def queue_limits(problem: RoutingProblem) -> list[int | None]:
    """``design.queue_limits`` (or :data:`DEFAULT_QUEUE_LIMITS`), each once, in order."""
    return list(dict.fromkeys(problem.spec.design.queue_limits or DEFAULT_QUEUE_LIMITS))


def design_spill(problem: RoutingProblem, design: DesignCandidate) -> tuple[SpillOutcome | None, list[SpillOutcome]]:
    """Every queue limit's search (:func:`queue_limits`) and the cheapest outcome that meets the design (the first
    limit on ties), None when no limit's does."""
    searched = [search_limit(problem, design, q) for q in queue_limits(problem)]
    found = [o for o in searched if o.meets]
    return (min(found, key=lambda o: o.cost_per_hour) if found else None), searched
