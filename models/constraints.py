"""Declarative constraint kinds: one contract for every problem kind's ``constraints:`` (docs/architecture.md).

A constraint kind (``budget``, ``availability``, ``gpu_mix``, ...) is one
:class:`ConstraintKind` record in its problem kind's :class:`ConstraintRegistry`
(optfleet/problems/fleet/constraints.py, optfleet/problems/profiled_fleet/constraints.py):

* ``declare(model, i, spec)`` adds the Block ``m.user_<kind>_<i>`` for the
  ``i``-th constraint of the instance and fills it with the kind's
  ``formulate(model, block, i, spec)`` (its rows and any variables of its
  own; models/fleet_constraints.py, models/profiled_constraints.py);
* ``start(model, block, spec)`` gives the block's own variables their
  MIP-start values once the model's variables hold a plan (the models'
  ``warm_start`` calls :func:`start_user_constraints`);
* ``check(problem, evaluation, spec) -> Verdict`` says whether a scored plan
  meets the constraint, in words: the plan checks of the kind;
* ``bound`` (optional, the problem kind's signature) widens or caps the
  bounds the model puts on GPU counts so that they never cut off an optimal
  plan the constraint allows; ``bound_proven`` is False when that widening
  is a heuristic the driver must certify afterwards;
* ``objective`` (optional) names the registered objective of a model that
  carries the constraint (a budget: maximise the served traffic);
* ``describe(spec)`` (optional) says what the constraint asks, in words, for
  messages (default: its kind).

A record joins the two layers: its formulation lives beneath, in models/,
and its check beside the kind's evaluator; the kind's package registers both.
A new kind is one more record: ``registry.register(ConstraintKind(...))``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import pyomo.environ as pyo

COST = "cost"  # the objective of a model no constraint kind changes: minimise $/hour
SERVED = "served"  # the objective under a budget cap: maximise the traffic served


class Verdict(NamedTuple):
    """Whether a plan meets one constraint, and what was measured (e.g. ``"6152 H100-SXM GPUs > 16"``)."""

    holds: bool
    detail: str


def _no_start(model: pyo.ConcreteModel, block: pyo.Block, spec: Any) -> None:
    """A block without variables of its own needs nothing for a MIP start."""


@dataclass(frozen=True)
class ConstraintKind:
    """One declarative constraint kind (module docstring)."""

    name: str
    formulate: Callable[[pyo.ConcreteModel, pyo.Block, int, Any], None]
    check: Callable[[Any, Any, Any], Verdict]
    start: Callable[[pyo.ConcreteModel, pyo.Block, Any], None] = _no_start
    bound: Callable[..., Any] | None = None
    bound_proven: bool = True
    objective: str | None = None
    describe: Callable[[Any], str] | None = None

    def declare(self, model: pyo.ConcreteModel, i: int, spec: Any) -> pyo.Block:
        """Add the Block ``m.user_<kind>_<i>`` holding constraint ``spec`` and record it for the MIP start."""
        block = pyo.Block()
        model.add_component(f"user_{self.name}_{i}", block)
        self.formulate(model, block, i, spec)
        model.user_constraints.append(DeclaredConstraint(block, spec, self))
        return block


@dataclass(frozen=True)
class DeclaredConstraint:
    """A declared constraint of a model: its block, its spec and its kind (the model's ``m.user_constraints``)."""

    block: pyo.Block
    spec: Any
    kind: ConstraintKind


class ConstraintRegistry:
    """The constraint kinds of one problem kind, by name."""

    def __init__(self, kinds: Iterable[ConstraintKind]) -> None:
        self._kinds: dict[str, ConstraintKind] = {}
        for kind in kinds:
            self.register(kind)

    def register(self, kind: ConstraintKind) -> ConstraintKind:
        """Add (or replace) the kind ``kind.name``."""
        self._kinds[kind.name] = kind
        return kind

    def __getitem__(self, name: str) -> ConstraintKind:
        return self._kinds[name]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._kinds)

    def declare_all(self, model: pyo.ConcreteModel, specs: Sequence[Any], skip: int | None = None) -> None:
        """Declare every constraint of ``specs`` on ``model`` (except index ``skip``: which one makes a model infeasible?)."""
        for i, spec in enumerate(specs):
            if i != skip:
                self[spec.kind].declare(model, i, spec)

    def add(self, model: pyo.ConcreteModel, spec: Any) -> pyo.Block:
        """Declare one more constraint from Python, numbered after the model's others."""
        return self[spec.kind].declare(model, len(model.user_constraints), spec)

    def objective(self, specs: Sequence[Any]) -> str:
        """The registered objective a model of ``specs`` optimises: the first a constraint names, else ``cost``."""
        return next((self[spec.kind].objective for spec in specs if self[spec.kind].objective is not None), COST)

    def verdicts(self, problem: Any, evaluation: Any, specs: Sequence[Any]) -> list[tuple[int, Any, Verdict]]:
        """``(i, spec, verdict)`` for every constraint of ``specs`` on a scored plan."""
        return [(i, spec, self[spec.kind].check(problem, evaluation, spec)) for i, spec in enumerate(specs)]


def start_user_constraints(model: pyo.ConcreteModel) -> None:
    """The MIP start of every declared constraint's own variables (after the model's variables hold the plan)."""
    for declared in model.user_constraints:
        declared.kind.start(model, declared.block, declared.spec)

