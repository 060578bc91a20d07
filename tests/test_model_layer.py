"""The model layer's contracts: constraint kinds (one record: block, MIP start, plan check, bound), objectives and
routing modes chosen by name when a model is built, and the one hand-over of arrays to HiGHS."""

from __future__ import annotations

import dataclasses
import typing

import numpy as np
import pyomo.environ as pyo
import pytest
from pyomo.core.expr import identify_variables

from optfleet.models import fleet as fleet_model
from optfleet.models.constraints import COST, SERVED
from optfleet.models.fleet_routing import ROUTING
from optfleet.problems.fleet.constraints import FLEET_CONSTRAINTS, gpu_bounds
from optfleet.problems.fleet.milp import solve_milp
from optfleet.problems.fleet.milp_data import prepare_milp_data
from optfleet.problems.fleet.schema import (
    AvailabilityConstraint,
    BudgetConstraint,
    FixedConstraint,
    GpuMixConstraint,
    MaxPoolsConstraint,
    MaxTypesConstraint,
    NodeMultipleConstraint,
    UserConstraint as FleetConstraintSpec,
)
from optfleet.problems.profiled_fleet.constraints import PROFILED_CONSTRAINTS
from optfleet.problems.profiled_fleet.schema import ProfiledConstraint
from optfleet.solvers.highs import highs_session, pass_model

from support import fleet_problem

pytestmark = pytest.mark.solved

EVERY_FLEET_KIND = (
    BudgetConstraint(kind="budget", max_cost_per_hour=100),
    AvailabilityConstraint(kind="availability", gpu="H100-SXM", max_gpus=40),
    GpuMixConstraint(kind="gpu_mix", gpu="A100-80GB", max_share=0.9),
    MaxPoolsConstraint(kind="max_pools", count=2),
    MaxTypesConstraint(kind="max_types", count=2),
    NodeMultipleConstraint(kind="node_multiple", gpus_per_node=2),
    FixedConstraint(kind="fixed", window_tokens=4000, instances=2),
)


def _schema_kinds(union: typing.Any) -> set[str]:
    """The ``kind`` tags of a discriminated union of constraint specs."""
    members = typing.get_args(typing.get_args(union)[0])
    return {typing.get_args(member.model_fields["kind"].annotation)[0] for member in members}


@pytest.mark.parametrize(("registry", "union"), [(FLEET_CONSTRAINTS, FleetConstraintSpec), (PROFILED_CONSTRAINTS, ProfiledConstraint)])
def test_every_registered_constraint_kind_is_nameable_in_instance_files_and_back(registry, union):
    assert set(registry.names) == _schema_kinds(union)


def _model(name: str, specs: tuple, routing: str = "split") -> pyo.ConcreteModel:
    problem = dataclasses.replace(fleet_problem(name), constraints=specs)
    data = prepare_milp_data(problem)
    model = fleet_model.build(data, data.service_ratio_ms, routing=routing, gpu_bounds=gpu_bounds(data, specs),
                              objective=FLEET_CONSTRAINTS.objective(specs))
    FLEET_CONSTRAINTS.declare_all(model, specs)
    return model


def test_each_constraint_is_one_named_block_and_a_budget_chooses_the_served_objective():
    model = _model("toy_hetero", EVERY_FLEET_KIND)
    for i, spec in enumerate(EVERY_FLEET_KIND):
        block = model.find_component(f"user_{spec.kind}_{i}")
        assert isinstance(block, pyo.Block) and list(block.component_objects(pyo.Constraint))
    assert [(c.block.name, c.spec) for c in model.user_constraints] == [(f"user_{s.kind}_{i}", s) for i, s in enumerate(EVERY_FLEET_KIND)]
    # The served objective is built, not patched in: nothing is deactivated, one objective, route rows admit `served`.
    assert model.objective_name == SERVED and model.objective.sense == pyo.maximize
    assert all(c.active for c in model.component_data_objects(pyo.Constraint)) and len(list(model.component_objects(pyo.Objective))) == 1
    assert any(var is model.served for var in identify_variables(model.route[0].body))
    plain = _model("toy_hetero", ())
    assert plain.objective_name == COST and plain.objective.sense == pyo.minimize and plain.find_component("served") is None


def test_routing_modes_are_swapped_families_the_model_records():
    split, threshold = _model("toy", (), "split"), _model("toy", (), "threshold")
    assert set(ROUTING) == {"split", "threshold", "sweep"} and (split.routing, threshold.routing) == ("split", "threshold")
    assert split.find_component("assign") is None and threshold.find_component("assign") is not None
    j = next(iter(threshold.compress.keys()))[1]  # a pool some band can be compressed into
    names = [{var.name for var in fleet_model.closed_pool_variables(model, j)} for model in (split, threshold)]
    extra = names[1] - names[0]  # threshold routing closes the pool's compression binaries too
    assert names[0] <= names[1] and extra and all(name.startswith(("compress[", "assign[")) for name in extra)


def test_a_mip_start_sets_the_constraints_own_variables():
    # max_types adds used[g], node_multiple adds nodes[g]: the sweep's plan starts them too, and the start is feasible.
    problem = dataclasses.replace(fleet_problem("toy"), constraints=(MaxTypesConstraint(kind="max_types", count=1),
                                                                    NodeMultipleConstraint(kind="node_multiple", gpus_per_node=1)))
    result = solve_milp(problem, routing="threshold")
    assert result.report.counts["mip_starts"] == 1 and result.report.counts["feasible_mip_starts"] == 1
    assert result.report.objective == pytest.approx(17.0)


def test_a_plan_check_is_the_kind_of_the_constraint_it_checks():
    problem = dataclasses.replace(fleet_problem("toy"), constraints=(MaxPoolsConstraint(kind="max_pools", count=1),))
    evaluation = solve_milp(dataclasses.replace(problem, constraints=())).evaluation  # two pools, 17 GPUs
    ((i, spec, verdict),) = FLEET_CONSTRAINTS.verdicts(problem, evaluation, problem.constraints)
    assert (i, spec.kind, verdict.holds, verdict.detail) == (0, "max_pools", False, "2 pools > 1")


def test_pass_model_raises_one_clear_error_when_highs_refuses_the_arrays():
    broken = (1, 1, 1, 1, 1, 0.0, np.zeros(1), np.zeros(1), np.ones(1), np.zeros(1), np.ones(1),
              np.array([0], dtype=np.int32), np.array([5], dtype=np.int32), np.ones(1), np.zeros(1, dtype=np.int32))  # row 5 of 1
    with highs_session() as (h, _), pytest.raises(RuntimeError, match="HiGHS refused the arrays of a broken model"):
        pass_model(h, broken, "a broken model")
