"""The per-set lower bounds of threshold routing (optfleet/problems/fleet/open_set_bounds.py) never exceed the
optimum of the set's case, on small catalogs with compression (where a pool may be fed only by compressed inflow),
at p_c = 1 and without compression; the stronger one is tight where the cheaper one misses the inflow's rounding."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyomo.environ as pyo
import pytest

import optfleet
from optfleet.instance.loader import read_document
from optfleet.models import fleet as fleet_model
from optfleet.problems.fleet.milp import covering_sets, open_set_cases, solve_milp
from optfleet.problems.fleet.milp_data import FleetMilpData, prepare_milp_data
from optfleet.problems.fleet.open_set_bounds import ThresholdCaseBound, threshold_set_bounds
from optfleet.problems.fleet.problem import FleetProblem
from optfleet.solvers.highs import case_optima, solve_cases

from support import FLEET_INSTANCES


def small_catalog(gpus: list[str], windows: list[int], cdf: str, pc: float = 0.75, compression: bool = True) -> FleetProblem:
    """``azure_2023_catalog`` (Llama-3-70B, TP 4 and 8, K = 3) over ``gpus`` x ``windows`` on the CDF ``cdf``."""
    path = FLEET_INSTANCES / "azure_2023_catalog.yaml"
    data = read_document(path)
    data["workload"]["lengths"] = {"cdf_file": str(path.parent / "data" / cdf)}
    data["gpu_catalog"]["gpus"] = gpus
    data["gpu_catalog"]["windows"] = windows
    data["compression"] = {"enabled": compression, "compressible_fraction": pc} if compression else {"enabled": False}
    return optfleet.load(data).problem


CATALOGS = {
    # the scale benchmark's optimum in small: H100 x8 at 4,096 fed only by compressed requests beside MI300X x8 at 65,536
    "lmsys-h100-mi300x": lambda: small_catalog(["H100-SXM", "MI300X"], [4096, 65536], "lmsys_multiturn_cdf.json"),
    "azure-h100-h200": lambda: small_catalog(["H100-SXM", "H200"], [4096, 16384, 65536], "azure_2023_cdf.json", pc=0.5),
    "lmsys-h100-mi300x-all-compressible": lambda: small_catalog(["H100-SXM", "MI300X"], [4096, 65536], "lmsys_multiturn_cdf.json", pc=1.0),
    "azure-h100-h200-no-compression": lambda: small_catalog(["H100-SXM", "H200"], [4096, 65536], "azure_2023_cdf.json", compression=False),
}


def bounds_and_optima(data: FleetMilpData, max_pools: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The covering sets of ``data`` under threshold routing, each set's case optimum (inf: no plan; each case solved
    alone, as the search solves it), its interval bound (:func:`threshold_set_bounds`) and its inflow bound
    (:class:`ThresholdCaseBound`)."""
    model = fleet_model.build(data, data.service_ratio_ms, routing="threshold", max_pools=max_pools)
    split = open_set_cases(model)
    sets = covering_sets(data, max_pools)
    optima = case_optima(model, split.groups, split.cases, mip_gap=1e-9)
    caps = np.array([pyo.value(model.gpu_bound[j]) for j in range(len(data.pools))], dtype=np.float64)
    inflow = ThresholdCaseBound(data, model.wait_tables, caps)
    return sets, optima, threshold_set_bounds(data, sets, model.wait_tables, caps), np.array([inflow(chosen) for chosen in sets])


@pytest.fixture(scope="module")
def solved_catalog() -> Callable[[str], tuple[FleetProblem, FleetMilpData, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """A catalog's problem, MILP data and :func:`bounds_and_optima`, each catalog solved once in this module (the
    inflow test reads the parametrized test's lmsys-h100-mi300x case; conftest.py keeps the module on one xdist worker)."""
    solved: dict[str, tuple[FleetProblem, FleetMilpData, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}

    def of(name: str) -> tuple[FleetProblem, FleetMilpData, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if name not in solved:
            problem = CATALOGS[name]()
            data = prepare_milp_data(problem)
            solved[name] = (problem, data, *bounds_and_optima(data))
        return solved[name]

    return of


@pytest.mark.parametrize("name", CATALOGS)
def test_threshold_bounds_never_exceed_the_case_optimum(name, solved_catalog):
    problem, _, sets, optima, interval, refined = solved_catalog(name)
    slack = 1e-6 * np.maximum(1.0, np.where(np.isfinite(optima), optima, 0.0))
    assert np.isfinite(optima).sum() >= 2
    for bound in (interval, refined):
        assert np.all((bound <= optima + slack) | np.isinf(optima))
    if problem.compression_enabled and problem.compressible_fraction >= 1:
        assert np.all(refined == -np.inf) and np.all(interval == -np.inf)  # a segment compressed whole may sit with a closed pool
    else:
        assert np.all(np.isfinite(refined[np.isfinite(optima)]))  # it applies to every set here


def test_the_inflow_bound_prices_a_pool_fed_only_by_compressed_requests_in_whole_instances(solved_catalog):
    # The optimum opens H100 x8 at 4,096 tokens with no segment of its own, only requests compressed into it from
    # longer segments: the interval bound prices that load linearly, the inflow bound in whole GPUs, exactly.
    problem, data, sets, optima, interval, refined = solved_catalog("lmsys-h100-mi300x")
    best = int(np.argmin(optima))
    solved = fleet_model.build(data, data.service_ratio_ms, routing="threshold", max_pools=3)
    split = open_set_cases(solved)
    solve_cases(solved, split.groups, [split.cases[best]], mip_gap=1e-9)
    fed_only = [j for j in sets[best] if pyo.value(solved.n[j]) > 0.5
                and all(pyo.value(solved.x[k, jj]) < 1e-9 for k, jj in solved.x if jj == j)]
    assert fed_only, "the optimum has a pool with compressed requests only"
    assert refined[best] == pytest.approx(optima[best], rel=1e-9) and interval[best] < optima[best] - 1.0
    finite = np.isfinite(optima)
    assert np.mean(np.isclose(refined[finite], optima[finite], rtol=1e-9)) > np.mean(np.isclose(interval[finite], optima[finite], rtol=1e-9))
    # the search that prunes by it (solve_milp, case by case) ends at the least case optimum
    result = solve_milp(problem, routing="threshold", max_pools=3)
    assert result.report.proven_optimal and result.report.objective == pytest.approx(optima.min(), rel=1e-9)
