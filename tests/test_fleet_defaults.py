"""Defaults a planner expects (the honest-baselines issue): compression off unless asked for, every method honouring
it, an infeasible instance told whether compression would help, and iteration constants refused beyond a 100 s
iteration."""

from __future__ import annotations

import pytest

import optfleet
from optfleet.errors import InfeasibleError, InputError
from optfleet.problems.fleet.evaluator import evaluate
from optfleet.problems.fleet.heuristics import FLEET_METHODS

from support import FLEET_INSTANCES

TOY = FLEET_INSTANCES / "toy.yaml"


def toy(**overrides):
    return optfleet.load(TOY, **overrides).problem


def test_an_instance_without_a_compression_block_plans_without_compression():
    import yaml

    document = yaml.safe_load(TOY.read_text())
    del document["compression"]
    document["workload"]["lengths"]["cdf"] = [[999, 0.0], [1000, 0.8], [3999, 0.8], [4000, 1.0]]
    loaded = optfleet.load(document)
    problem = loaded.problem
    assert not problem.compression_enabled and problem.gammas == (1.0,)
    assert "compression off" in optfleet.validate(document).text
    assert FLEET_METHODS["sweep"](problem).gamma == 1.0


def test_retrofit_is_not_available_when_compression_is_off():
    frame = optfleet.gap(TOY, compression__enabled=False).set_index("method")
    assert frame.loc["retrofit", "status"] == "not_available"
    assert "compression.enabled" in frame.loc["retrofit", "note"]
    with pytest.raises(InputError) as caught:
        FLEET_METHODS["retrofit"](toy(compression__enabled=False))
    assert caught.value.field == "compression.enabled"


TIGHT = {"slo__ttft_p99_ms": 3, "compression__compressible_fraction": 1.0}
"""The toy's 3,000-token prompts take 3 chunks + 1 iteration = 4 ms in any pool that serves them uncut, above a 3 ms
SLO; cut to 1,000 tokens in the 2,000-token pool (gamma 2, every prompt compressible) they take 2 ms."""


@pytest.mark.parametrize("method", ["sweep", "milp"])
def test_an_instance_infeasible_without_compression_says_that_compression_would_make_it_feasible(method):
    on = FLEET_METHODS["sweep"](toy(**TIGHT))
    assert (on.boundary_tokens, on.gamma) == (2000, 2.0)
    cost = evaluate(toy(**TIGHT), on).cost_per_hour
    off = toy(**TIGHT, compression__enabled=False, solve__method=method)
    with pytest.raises(InfeasibleError) as caught:
        if method == "milp":
            from optfleet.problems.fleet.milp import solve_milp

            solve_milp(off)
        else:
            FLEET_METHODS["sweep"](off)
    message = str(caught.value)
    assert "with compression on (compression.enabled: true, compressible share 1, gamma up to 2" in message
    assert f"finds a plan at ${cost:,.2f}/h (B = 2000, gamma = 2)" in message


def test_an_instance_compression_cannot_save_says_so():
    off = toy(slo__ttft_p99_ms=1.5, compression__enabled=False)  # even one chunk and one iteration take 2 ms
    with pytest.raises(InfeasibleError) as caught:
        FLEET_METHODS["sweep"](off)
    assert "compression would not make it feasible either" in str(caught.value)


@pytest.mark.parametrize("field", ["hardware.iteration.w_ms", "hardware.iteration.h_ms_per_slot"])
def test_iteration_constants_beyond_a_100_s_iteration_are_refused(field):
    with pytest.raises(InputError) as caught:
        optfleet.load(TOY, **{field.replace(".", "__"): 1e308})
    assert caught.value.field == field and "100,000" in str(caught.value)


@pytest.mark.solved
def test_the_milp_says_when_k_decides_the_plan():
    """The toy at K = 1 can only open one pool (26 GPUs at the long window); at K = 2 the MILP finds the C&R plan of 17
    GPUs ($17/h, the toy's hand-computed optimum): the row's note says K decides it and what to set.  At K = 2 both
    windows are open and no third pool exists: no note."""
    one = optfleet.gap(TOY, methods="milp", solve__max_pools=1).set_index("method").loc["milp"]
    assert one["objective"] == 26.0
    assert "K = 1 (solve.max_pools) decides the plan: with K = 2 the MILP finds $17.00/h (-34.6 %); set solve.max_pools: 2" in one["note"]
    two = optfleet.gap(TOY, methods="milp").set_index("method").loc["milp"]
    assert two["objective"] == 17.0 and "solve.max_pools" not in two["note"]
