"""``hindsight_search``: a placement of the whole trace found by simulated annealing, every candidate scored by the
simulator (evaluate.py's replay, the one evaluator).

It knows every arrival in advance, so it is no online policy; and it proves nothing: it is a heuristic for the
simulator's best placement, whose objective its placement bounds from **above**.  That gives two readings a bound
cannot:

* a policy's excess over it is at most the policy's excess over the best placement (gap_summary's "best known");
* where it lies below ``best policy / (1 + g)``, no valid lower bound can put the best policy within ``g`` of it:
  any bound is at most the optimum, which is at most this placement's objective.

**Search** (Kirkpatrick, Gelatt and Vecchi 1983).  Start: the best placement among the instance's policies (each
routed and scored in full, whatever the time limit; round robin when the instance lists none).  Each step draws a
move: with probability 0.4 one request goes to another server, 0.3 two requests on different servers swap them,
0.3 every turn of one conversation (``session``) goes to one server (a draw that changes nothing is drawn again,
not scored); the candidate is scored and kept when its objective ``f'`` is at most the current ``f``, or else with
probability ``exp(-(f' - f) / T)``, ``T = T0 (1 - x)^2`` where ``x`` is the share of the run done: ``i / N`` at
evaluation ``i`` of ``N`` (``solve.search_evaluations``), unless after :data:`PACE_EVALUATIONS` evaluations the
pace so far would not finish the ``N`` within the time left when the moves began (``solve.time_limit_s``): then
the share of that time that has passed, so a run the time limit cuts short still cools.  ``T0``
makes a worsening move of the mean size accepted with probability :data:`START_ACCEPTANCE` at first:
``T0 = mean(f' - f > 0) / ln(1 / START_ACCEPTANCE)`` over the first :data:`CALIBRATION_MOVES` moves from the
start (each scored, counted, kept as the best if it is, and undone; ``0.002 f_start`` if none worsens).  The best
placement seen is returned.  It stops after ``N`` evaluations or at ``solve.time_limit_s``, whichever comes
first.  Given ``solve.search_seed``, a run whose pace never falls behind its time limit gives the same placement
on any machine with the same start and the same numpy (its random streams are numpy's); one that cools on the
clock depends on the machine's speed.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from optfleet.errors import InputError
from optfleet.problems.placement.engines import ENVIRONMENT, compiled_engine
from optfleet.problems.placement.evaluate import objective_of_ttft, replay
from optfleet.problems.placement.problem import PlacementProblem

MOVE_ONE, MOVE_SWAP = 0.4, 0.7  # cumulative: one request, a swap, else a conversation
START_ACCEPTANCE = 0.05  # the chance of keeping a worsening move of the mean size at the start
CALIBRATION_MOVES = 50  # moves from the start that set T0 (at most a twentieth of the evaluations)
PACE_EVALUATIONS = 100  # evaluations before the pace may switch the schedule to the clock
FALLBACK_TEMPERATURE = 0.002  # T0 as a share of the start's objective when no calibration move worsens it


STOPPED_BY = {"count": "solve.search_evaluations", "time": "solve.time_limit_s", "one server": "one server (nothing to move)"}


@dataclass(frozen=True)
class SearchSummary:
    """How a search went: the placement it started from (its method and objective), evaluations done, moves kept,
    and what ended it (a key of :data:`STOPPED_BY`)."""

    start_method: str
    start_objective_ms: float
    evaluations: int
    accepted: int
    stopped_by: str

    def note(self, best_ms: float) -> str:
        """The row's note: what the row is and how the search went."""
        return (f"a hindsight heuristic (no policy, no bound): from {self.start_method} ({self.start_objective_ms:,.4g} ms) to "
                f"{best_ms:,.4g} ms in {self.evaluations:,} evaluations ({self.accepted:,} moves kept); stopped by "
                f"{STOPPED_BY[self.stopped_by]}")


def objective_ms(problem: PlacementProblem, placement: np.ndarray, engine: str | None) -> float:
    """The instance's objective of ``placement`` (evaluate.py's) from the simulator's timeline, without the other
    metrics."""
    return objective_of_ttft(problem, replay(problem, placement, engine).first_token_ms - problem.requests.arrival_ms)


def search_engine(problem: PlacementProblem) -> str | None:
    """The simulator the search replays with: the compiled one whenever it can run here (a search replays the
    trace thousands of times, so its second of loading pays off at any size), unless ``OPTFLEET_PLACEMENT_ENGINE``
    chooses (None: engines.py reads it, and names it in any error)."""
    if os.environ.get(ENVIRONMENT):
        return None
    try:
        return "compiled" if compiled_engine(problem, "compiled") is not None else "python"
    except InputError:
        return "python"


def start_placement(problem: PlacementProblem, engine: str | None) -> tuple[str, np.ndarray, float]:
    """The best of the instance's policies (label, placement, objective); round robin when it lists none."""
    from optfleet.problems.placement.policies import make_policy, route

    entries = [(p.label, p.name, p.params) for p in problem.policies] or [("round_robin", "round_robin", {})]
    best = None
    for label, name, params in entries:
        placement = route(problem, make_policy(problem, name, params, "policies"), engine=engine)
        value = objective_ms(problem, placement, engine)
        if best is None or value < best[2]:
            best = (label, placement, value)
    return best


def hindsight_search(problem: PlacementProblem, progress: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, SearchSummary]:
    """The search of the module docstring: the best placement found and how the search went."""
    started = time.perf_counter()
    limit_s = problem.solve.time_limit_s
    budget = problem.solve.search_evaluations
    engine = search_engine(problem)
    start_method, current, value = start_placement(problem, engine)
    best, best_value, start_value = current.copy(), value, value
    n, k = len(problem.requests), len(problem.engines)
    if k == 1:
        return best, SearchSummary(start_method, start_value, 0, 0, "one server")
    rng = np.random.default_rng(problem.solve.search_seed)
    sessions = np.unique(problem.requests.session, return_inverse=True)[1]
    members = np.split(np.argsort(sessions, kind="stable"), np.cumsum(np.bincount(sessions))[:-1])
    moves_from = time.perf_counter()
    time_left_s = None if limit_s is None else limit_s - (moves_from - started)

    def share_done(done: int) -> float | None:
        """The share of the run done (module docstring); None once the evaluations or the time are used up."""
        elapsed = time.perf_counter() - moves_from
        if done >= budget or (time_left_s is not None and elapsed >= time_left_s):
            return None
        if time_left_s is not None and done >= PACE_EVALUATIONS and elapsed / done * budget > time_left_s:
            return elapsed / time_left_s  # the pace will not finish the evaluations in time: cool on the clock
        return done / budget

    def move() -> tuple[np.ndarray, np.ndarray]:
        """Apply a random move that changes ``current``; the moved requests and their servers before it."""
        while True:
            draw = rng.random()
            if draw < MOVE_ONE:
                moved = rng.integers(n, size=1)
                before = current[moved].copy()
                current[moved] = (before + rng.integers(1, k)) % k
                return moved, before
            if draw < MOVE_SWAP:
                moved = rng.integers(n, size=2)
                before = current[moved].copy()
                if before[0] != before[1]:
                    current[moved] = before[::-1]
                    return moved, before
                continue
            moved = members[rng.integers(len(members))]
            before = current[moved].copy()
            target = rng.integers(k)
            if np.any(before != target):
                current[moved] = target
                return moved, before

    def report(done: int) -> None:
        if progress is not None:
            progress(done, budget)

    accepted = done = 0
    report_every = max(1, budget // 100)
    worse = []
    for _ in range(min(CALIBRATION_MOVES, budget // 20)):
        if share_done(done) is None:
            break
        moved, before = move()
        delta = objective_ms(problem, current, engine) - value
        done += 1
        if value + delta < best_value:
            best, best_value = current.copy(), value + delta
        current[moved] = before
        if delta > 0:
            worse.append(delta)
    report(done)
    t0 = float(np.mean(worse)) / math.log(1.0 / START_ACCEPTANCE) if worse else FALLBACK_TEMPERATURE * value
    while (share := share_done(done)) is not None:
        moved, before = move()
        candidate = objective_ms(problem, current, engine)
        done += 1
        temperature = t0 * (1.0 - share) ** 2
        if candidate <= value or (temperature > 0 and rng.random() < math.exp(-(candidate - value) / temperature)):
            value = candidate
            accepted += 1
            if value < best_value:
                best, best_value = current.copy(), value
        else:
            current[moved] = before
        if done % report_every == 0:
            report(done)
    report(done)
    return best, SearchSummary(start_method, start_value, done, accepted, "count" if done >= budget else "time")
