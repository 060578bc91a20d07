"""The routing kind end to end on small instances: hindsight bounds the routers, the design MILP is the grid's
optimum, the replay counts what it should, and bad input exits 2 naming the field."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import yaml

import optfleet
from optfleet.cli import main
from optfleet.errors import EXIT_BAD_INPUT, InfeasibleError, InputError
from optfleet.instance import load_instance
from optfleet.problems.routing.design import candidates, design_ratios, evaluate_design, plan_design
from optfleet.problems.routing.design_milp import solve_design
from optfleet.problems.routing.dispatcher import LONG, SHORT
from optfleet.problems.routing.evaluator import evaluate
from optfleet.problems.routing.exact import hindsight
from optfleet.problems.routing.problem import prepare
from optfleet.problems.routing.replay import replay_router

from support import REPO, documentation_text

TINY = REPO / "instances" / "routing" / "tiny.yaml"


def _tiny(**changes) -> dict:
    doc = yaml.safe_load(TINY.read_text())
    doc["fleet"]["instance"] = str(REPO / "instances" / "fleet" / "toy.yaml")
    for dotted, value in changes.items():
        node = doc
        *path, last = dotted.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return doc


@pytest.fixture(scope="module")
def tiny():
    return prepare(load_instance(TINY))


def test_hindsight_bounds_every_feasible_router_and_never_misroutes(tiny):
    placement, report = hindsight(tiny)
    assert report.status == "optimal" and report.bound is not None
    best = evaluate(tiny, placement, needed=False)
    assert best.misroutes == 0 and best.capacity_ok
    assert best.busy_instances == pytest.approx(report.objective, rel=1e-6)
    for name, calibrator in tiny.calibrators.items():
        e = evaluate(tiny, replay_router(tiny, calibrator), needed=False)
        if e.capacity_ok:
            assert e.busy_instances >= report.bound - 1e-6, name


def test_hindsight_with_slack_capacity_serves_everything_that_fits_short(tiny):
    # the tiny plan's pools are far from full: the optimum puts every request that fits short there, compressed in the band
    placement, _ = hindsight(tiny)
    s, rule = tiny.stream, tiny.rule
    fits = s.total_tokens <= rule.short_window_tokens
    band = (np.isin(s.category, tiny.compressible) & (s.total_tokens > rule.b_short_tokens)
            & (s.total_tokens <= np.floor(rule.compress_gamma * rule.b_short_tokens)) & (s.output_tokens < rule.b_short_tokens))
    assert (placement.pool == np.where(fits | band, SHORT, LONG)).all()
    assert (placement.input_tokens[placement.compressed] + s.output_tokens[placement.compressed] == rule.b_short_tokens).all()


def test_hindsight_with_a_tight_short_pool_keeps_its_capacity():
    problem = prepare(load_instance(_tiny(**{"fleet.boundary_tokens": None, "fleet.plan": {
        "pools": [{"name": "short", "window_tokens": 2000, "instances": 3}, {"name": "long", "window_tokens": 4000, "instances": 40}]}})))
    placement, report = hindsight(problem)
    e = evaluate(problem, placement, needed=False)
    assert report.status == "optimal" and e.capacity_ok
    fits = problem.stream.total_tokens <= problem.rule.short_window_tokens
    assert ((placement.pool == LONG) & fits).any()  # the short pool cannot take everything that fits


def test_design_milp_is_the_grids_cheapest_candidate_within_epsilon(tiny):
    chosen, report = solve_design(tiny)
    ratios = design_ratios(tiny)
    scored = [evaluate_design(tiny, c, ratios) for c in candidates(tiny)]
    best = min(e.cost_per_hour for e in scored if e.feasible)
    assert report.status == "optimal" and report.objective == pytest.approx(best)
    assert evaluate_design(tiny, chosen).cost_per_hour == pytest.approx(best)


def test_design_pools_are_sized_by_the_fleet_evaluators_rule(tiny):
    """One request shape (E[S] fixed, Cs^2 = 0) at 30 req/s: the cap alone sizes the pool under a loose SLO; under
    a tight one it is the least n whose Kimura P99 wait plus the TTFT floor meets the SLO (checked against the
    queueing primitives at n and n - 1); below the floor no size does."""
    from optfleet.problems.fleet.pool_stats import pool_stats
    from optfleet.problems.routing.design import sized_instances
    from optfleet.queueing.kimura import wait_quantile_s

    config = tiny.pools[0]
    l_in, l_out, span = np.full(300, 600), np.full(300, 200), 10.0
    stats = pool_stats(config, l_in, l_out, np.full(300, 1 / 300), tiny.fleet.ttft_rule)
    load = 30.0 * stats.mean_service_ms / 1000.0

    def sized(slo_ms: float) -> int:
        return sized_instances(dataclasses.replace(tiny, fleet=dataclasses.replace(tiny.fleet, ttft_p99_ms=slo_ms)), config, l_in, l_out, span)

    assert sized(1e7) == int(np.ceil(load / (tiny.rho_max * config.slots_per_instance)))
    assert sized(stats.ttft_floor_ms * 0.9) == -1
    slo = stats.ttft_floor_ms + 5.0
    n = sized(slo)

    def p99_ttft(gpus: int) -> float:
        servers = gpus * config.slots_per_instance
        if load >= servers:
            return np.inf
        return 1000.0 * float(wait_quantile_s(servers, load, stats.mean_service_ms / 1000.0, 0.0)) + stats.ttft_floor_ms

    assert n > sized(1e7) and p99_ttft(n) <= slo * (1 + 1e-9) < p99_ttft(n - 1)
    assert sized_instances(tiny, config, l_in[:0], l_out[:0], span) == 0


def test_design_is_never_worse_than_the_plans_own_dispatcher_off_the_grid():
    # The plan's gamma 2 is not in the design grid's gammas: the design still considers it, so its "optimal" is a bound
    problem = prepare(load_instance(_tiny(**{"fleet.gamma": 2.0})))
    own = evaluate_design(problem, plan_design(problem))
    chosen, report = solve_design(problem)
    assert plan_design(problem) in candidates(problem)
    assert own.feasible and report.objective <= own.cost_per_hour + 1e-9


def test_static_ratio_misroutes_a_dense_script_and_the_calibrators_do_not():
    # a script at 1.2 bytes/token read at 4.0 cuts its prompt estimate to 30 %: the 4,000-token requests (3,000 prompt
    # and 1,000 output tokens) look like 1,900 and land in the 2,000-token short pool
    problem = prepare(load_instance(_tiny(**{"categories": [{"name": "dense", "bytes_per_token": 1.2, "compressible": False}],
                                             "fleet.gamma": 1.0})))
    static = evaluate(problem, replay_router(problem, problem.calibrators["static"]), needed=False)
    paper = evaluate(problem, replay_router(problem, problem.calibrators["paper"]), needed=False)
    assert static.misroutes > 10 * max(paper.misroutes, 1)


def test_spillover_moves_requests_and_batching_mode_measures_tpot():
    problem = prepare(load_instance(_tiny(**{"dispatcher.queue_limit": 0, "replay.mode": "batching",
                                             "fleet.boundary_tokens": None, "fleet.plan": {"pools": [
                                                 {"name": "short", "window_tokens": 2000, "instances": 2},
                                                 {"name": "long", "window_tokens": 4000, "instances": 13}]}})))
    e = evaluate(problem, replay_router(problem, problem.calibrators["paper"]), needed=False)
    assert e.spills > 0
    assert e.pools[0].tpot_p50_ms is not None and e.pools[0].tpot_p50_ms >= 1.0 - 1e-9  # at least one 1-ms iteration per token


def _write_stream(tmp_path, rows: list[str], **changes) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "stream.csv").write_text("arrival_s,bytes,input_tokens,output_tokens,category\n" + "\n".join(rows) + "\n")
    doc = _tiny(**{"stream.file": str(tmp_path / "stream.csv"), **changes})
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


ROWS = ["0.0,4000,1000,200,prose", "0.5,2000,1000,100,cjk", "1.0,3500,1000,50,code", "1.5,4500,1000,50,prose"]


def test_a_stream_file_replays(tmp_path):
    outcome = optfleet.run_gap(_write_stream(tmp_path, ROWS))
    rows = {row["method"]: row for row in outcome.rows}
    assert rows["hindsight"]["status"] == "optimal" and rows["paper"]["misroutes"] == 0


@pytest.mark.parametrize(("rows", "changes", "field"), [
    (["0.0,0,1000,200,prose"], {}, "stream.bytes"),
    (["0.0,-5,1000,200,prose"], {}, "stream.bytes"),
    (["0.0,400,1000,200,poetry"], {}, "stream.category"),
    (ROWS, {"fleet.gamma": 0.5}, "fleet.gamma"),
    (ROWS, {"dispatcher.b_short_tokens": 2500}, "dispatcher.b_short_tokens"),
    (ROWS, {"dispatcher.compress_gamma": 0.9}, "dispatcher.compress_gamma"),
    (ROWS, {"calibrator.decay": 1.0}, "calibrator.decay"),
    (ROWS, {"calibrator.beta": 0.0}, "calibrator.beta"),
    (ROWS, {"unknown_category": "guess"}, "unknown_category"),
    (["0.0,400.5,1000,200,prose"], {}, "stream.bytes"),  # not a whole number
    (["0.0,1e300,1000,200,prose"], {}, "stream.bytes"),  # above 2**53: int64 would overflow
    (ROWS, {"categories": [{"name": "prose", "bytes_per_token": 1e300}, {"name": "code", "bytes_per_token": 3.5},
                           {"name": "cjk", "bytes_per_token": 2.0}]}, "categories.0.bytes_per_token"),
    (ROWS, {"calibrator.static_ratio": 1e-300}, "calibrator.static_ratio"),
    (ROWS, {"calibrator.min_ratio": 0.0}, "calibrator.min_ratio"),
    (ROWS, {"exact.window_s": 1e-300}, "exact.window_s"),  # 10^300 capacity windows
    (ROWS, {"fleet.instance": "no_such_fleet.yaml"}, "fleet.instance"),
    (ROWS, {"solve.method": "foo"}, "solve.method"),  # gap runs other methods, but the file's own must be known
])
def test_bad_input_exits_2_naming_the_field(tmp_path, capsys, rows, changes, field):
    path = _write_stream(tmp_path, rows, **changes)
    assert main(["gap", path, "--out", str(tmp_path / "out")]) == EXIT_BAD_INPUT
    assert field in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_unknown_category_default_policy_tracks_it_on_its_own(tmp_path):
    path = _write_stream(tmp_path, [*ROWS, "2.0,900,300,20,poetry", "2.5,920,300,20,poetry"], unknown_category="default")
    problem = optfleet.load(path).problem
    assert problem.stream.names[-1] == "poetry" and problem.stream.true_ratio[-1] == pytest.approx((3.0 + 920 / 300) / 2)
    assert dataclasses.replace(problem.rule).compressible == problem.rule.compressible


def test_the_docs_quote_every_routing_benchmark_table():
    readme = documentation_text()
    published = (REPO / "benchmarks" / "results" / "routing.md").read_text().strip().split("\n\n")
    tables = [block for block in published if block.startswith("|")]
    assert len(tables) == 5
    for table in tables:
        assert table in readme


@pytest.mark.slow
def test_azure_4k_replay_numbers_quoted_in_the_readme():
    rows = {row["method"]: row for row in optfleet.run_gap(REPO / "instances" / "routing" / "azure_2023_4k.yaml").rows}
    assert round(rows["hindsight"]["objective"], 1) == 248.8 and rows["hindsight"]["status"] == "optimal"
    assert round(rows["paper"]["objective"], 1) == 256.1 and round(rows["paper"]["misroute_pct"], 3) == 0.161
    assert rows["paper"]["refused"] == 51
    assert round(rows["static"]["misroute_pct"], 2) == 1.52
    assert rows["design"]["objective"] == pytest.approx(612.17, abs=0.01)


@pytest.mark.parametrize(("changes", "field"), [
    ({"design.short_windows_tokens": [4000]}, "design.short_windows_tokens"),
    ({"fleet.boundary_tokens": None, "fleet.method": "homogeneous"}, "fleet.method"),
])
def test_bad_design_window_and_one_pool_plan(tmp_path, capsys, changes, field):
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(_tiny(**changes)))
    assert main(["gap", str(path)]) == EXIT_BAD_INPUT
    assert f"error: {field}" in capsys.readouterr().err


def test_a_non_numeric_stream_value_names_its_column_and_row(tmp_path, capsys):
    path = _write_stream(tmp_path, ["1.0,400,1000,200,prose", "0.0,lots,1000,200,prose"])
    assert main(["validate", path]) == EXIT_BAD_INPUT
    assert "stream.bytes = 'lots': not a finite number (row 2 of " in capsys.readouterr().err


def test_a_field_of_the_fleet_instance_is_named_with_its_file(tmp_path, capsys):
    fleet = yaml.safe_load((REPO / "instances" / "fleet" / "toy.yaml").read_text())
    fleet["workload"]["rate_rps"] = -1
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(fleet))
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(_tiny(**{"fleet.instance": "fleet.yaml"})))
    assert main(["validate", str(path)]) == EXIT_BAD_INPUT
    assert "error: fleet.instance (fleet.yaml): workload.rate_rps = -1" in capsys.readouterr().err


def test_overflow_objective_bounds_every_router_on_a_fleet_too_small():
    """A fleet too small for the stream: the busy-GPU hindsight has no placement, the overflow one gives the least
    work above the capacity windows, below every router's own overflow (the evaluator's, for every placement)."""
    small = {"fleet.boundary_tokens": None, "exact.objective": "overflow", "exact.window_s": 200.0, "fleet.plan": {
        "pools": [{"name": "short", "window_tokens": 2000, "instances": 2}, {"name": "long", "window_tokens": 4000, "instances": 6}]}}
    problem = prepare(load_instance(_tiny(**small)))
    placement, report = hindsight(problem)
    bound = evaluate(problem, placement, needed=False)
    assert report.status == "optimal" and bound.overflow_slot_s > 0 and not bound.capacity_ok
    assert bound.overflow_slot_s == pytest.approx(report.objective, rel=1e-6)
    for name in ("paper", "router", "static"):
        routed = evaluate(problem, replay_router(problem, problem.calibrators[name]), needed=False)
        assert routed.overflow_slot_s >= report.bound * (1 - 1e-9)
    busy = prepare(load_instance(_tiny(**{**small, "exact.objective": "busy_instances"})))
    with pytest.raises(InfeasibleError):
        hindsight(busy)


def test_the_old_names_of_instance_counts_are_refused_naming_the_new_ones(tmp_path, capsys):
    """``busy_gpus`` (the objective) and a plan pool's ``gpus`` became ``busy_instances`` and ``instances``: counts of
    instances, each of ``tp`` GPUs; the old names are refused with a message naming the new."""
    with pytest.raises(InputError, match=r"exact\.objective.*busy_instances"):
        load_instance(_tiny(**{"exact.objective": "busy_gpus"}))
    plan = {"pools": [{"name": "short", "window_tokens": 2000, "gpus": 3}, {"name": "long", "window_tokens": 4000, "instances": 4}]}
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(_tiny(**{"fleet.boundary_tokens": None, "fleet.plan": plan})))
    assert main(["validate", str(path)]) == EXIT_BAD_INPUT
    assert "renamed instances" in capsys.readouterr().err


def test_overflow_hindsight_breaks_ties_by_least_busy_instances(tiny):
    """With room for the stream (no overflow), the overflow hindsight's placement is the busy-GPU hindsight's optimum."""
    _, busy_report = hindsight(tiny)
    overflow_problem = prepare(load_instance(_tiny(**{"exact.objective": "overflow"})))
    placement, report = hindsight(overflow_problem)
    assert report.status == "optimal" and report.objective == pytest.approx(0.0, abs=1e-9)
    assert evaluate(overflow_problem, placement, needed=False).busy_instances == pytest.approx(busy_report.objective, rel=1e-6)


def test_a_design_no_pool_size_can_serve_is_left_out_and_explained(tiny):
    from optfleet.problems.routing.kind import _run_design

    floorless = dataclasses.replace(tiny, fleet=dataclasses.replace(tiny.fleet, ttft_p99_ms=1e-3))
    own = _run_design(floorless, "design_plan")
    assert not own.feasible and own.objective is None and "cannot meet the P99 TTFT SLO of 0.001 ms at any size" in own.note
    with pytest.raises(InfeasibleError, match="in none of the .* candidates can both pools meet the P99 TTFT SLO"):
        solve_design(floorless)


def _hetero(tmp_path, constraints=()) -> "RoutingProblem":  # noqa: F821 - the routing problem on the two-GPU toy fleet
    fleet = yaml.safe_load((REPO / "instances" / "fleet" / "toy_hetero.yaml").read_text())
    fleet["constraints"] = list(constraints)
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(fleet))
    doc = _tiny()
    doc["fleet"]["instance"] = str(tmp_path / "fleet.yaml")
    doc["design"]["short_windows_tokens"] = [1000, 2000]
    path = tmp_path / "routing.yaml"
    path.write_text(yaml.safe_dump(doc))
    return prepare(load_instance(path))


def test_joint_design_is_the_cheapest_rule_and_gpu_pair_of_the_catalog(tmp_path):
    """Without constraints the MILP's optimum is the enumeration's: every rule of the grid with every (short, long)
    pair of the catalog's GPU configurations, each pool at its fewest instances."""
    problem = _hetero(tmp_path)
    chosen, report = solve_design(problem)
    ratios = design_ratios(problem)
    scored = [evaluate_design(problem, c, ratios) for c in candidates(problem)]
    assert {c.short_gpu for c in candidates(problem)} == {"A100-80GB", "H100-SXM"}
    best = min(e.cost_per_hour for e in scored if e.feasible)
    assert report.status == "optimal" and report.objective == pytest.approx(best)
    e = evaluate_design(problem, chosen)
    assert e.feasible and e.cost_per_hour == pytest.approx(best) and e.plan.pools[0].gpu == chosen.short_gpu
    # the plan's own GPUs (A100 only) cost more: H100 is cheaper per unit of work on this fleet
    assert evaluate_design(problem, plan_design(problem)).cost_per_hour > best


@pytest.fixture(scope="module")
def unconstrained_design_cost(tmp_path_factory) -> float:
    """The cost of the joint design on the two-GPU toy fleet without constraints, solved once for the constrained cases."""
    problem = _hetero(tmp_path_factory.mktemp("unconstrained"))
    free, _ = solve_design(problem)
    return evaluate_design(problem, free).cost_per_hour


@pytest.mark.parametrize("constraint", [
    {"kind": "availability", "gpu": "H100-SXM", "max_gpus": 3},
    {"kind": "gpu_mix", "gpu": "A100-80GB", "min_share": 0.5},
    {"kind": "max_types", "count": 1},
])
def test_joint_design_under_a_fleet_constraint_is_no_cheaper_than_without_and_meets_it(tmp_path, constraint, unconstrained_design_cost):
    problem = _hetero(tmp_path, [constraint])
    chosen, report = solve_design(problem)
    e = evaluate_design(problem, chosen)
    assert report.status == "optimal" and e.feasible and not e.violations
    assert e.cost_per_hour == pytest.approx(report.objective)
    assert e.cost_per_hour >= unconstrained_design_cost - 1e-9
    # brute force over the candidates at their fewest instances and up to 6 more per pool (the calibrator's ratios
    # computed once: evaluate_design computes the same ones when not given)
    best, ratios = np.inf, design_ratios(problem)
    for c in candidates(problem):
        base = evaluate_design(problem, c, ratios)
        if min(base.fewest) < 0 or base.misroute_probability > problem.spec.design.epsilon:
            continue
        for extra_s in range(7):
            for extra_l in range(7):
                instances = (base.fewest[0] + extra_s, base.fewest[1] + extra_l)
                scored = evaluate_design(problem, dataclasses.replace(c, instances=instances), ratios)
                if scored.feasible:
                    best = min(best, scored.cost_per_hour)
    assert report.objective == pytest.approx(best)


def test_joint_design_names_the_constraint_that_leaves_no_design(tmp_path, capsys):
    problem = _hetero(tmp_path, [{"kind": "availability", "gpu": "H100-SXM", "max_gpus": 0},
                                 {"kind": "availability", "gpu": "A100-80GB", "max_gpus": 1}])
    with pytest.raises(InfeasibleError, match=r"without constraints\[0\] \(availability; least \$[\d,.]+/h without it\) or "
                                              r"constraints\[1\] \(availability; least \$[\d,.]+/h without it\) a design exists"):
        solve_design(problem)
    assert main(["solve", str(tmp_path / "routing.yaml"), "--method", "design"]) != 0
    assert "constraints[1] (availability; least $" in capsys.readouterr().out


def test_catalog_mix_design_numbers_quoted_in_the_readme():
    problem = prepare(load_instance(REPO / "instances" / "routing" / "azure_2023_catalog_mix.yaml"))
    chosen, report = solve_design(problem)
    e = evaluate_design(problem, chosen)
    assert report.status == "optimal" and round(report.objective, 2) == 2286.72 and e.feasible
    assert (chosen.rule, chosen.short_gpu, chosen.long_gpu, chosen.instances) == ((8192, 7372, 1.5), "H200 x8", "A100-80GB x8", (63, 27))
    own = evaluate_design(problem, plan_design(problem))
    assert round(own.cost_per_hour, 2) == 2281.12 and [v.split(" ")[0] for v in own.violations] == ["constraints[0]", "constraints[1]"]


@pytest.mark.parametrize(("rows", "changes", "field"), [
    (["0.0,3000,750,250,prose"], {}, "stream.file"),
    (["2.0,3000,750,250,prose", "2.0,4000,1000,100,code"], {}, "stream.file"),
    (None, {"stream.requests": 1}, "stream.requests"),
])
def test_a_stream_at_one_instant_is_refused(tmp_path, capsys, rows, changes, field):
    if rows is None:
        path = tmp_path / "instance.yaml"
        path.write_text(yaml.safe_dump(_tiny(**changes)))
        path = str(path)
    else:
        path = _write_stream(tmp_path, rows, **changes)
    assert main(["validate", path]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert f"error: {field}" in err and "span 0 s" in err


def _toy_routing(tmp_path, constraints, **design) -> "RoutingProblem":  # noqa: F821
    fleet = yaml.safe_load((REPO / "instances" / "fleet" / "toy.yaml").read_text())
    fleet["constraints"] = list(constraints)
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(fleet))
    doc = _tiny()
    doc["fleet"]["instance"] = str(tmp_path / "fleet.yaml")
    doc["design"].update(design)
    path = tmp_path / "routing.yaml"
    path.write_text(yaml.safe_dump(doc))
    return prepare(load_instance(path))


def test_a_design_whose_long_pool_receives_nothing_leaves_it_empty_and_counts_one_pool(tmp_path):
    # every category compressible with a band up to 5 B at B = 1,200: every request goes short, the 4,000-token ones
    # (1,000 output tokens) compressed
    changes = {"threshold_fractions": [0.6], "gammas": [5.0], "short_windows_tokens": [2000]}
    problem = _toy_routing(tmp_path, [{"kind": "max_pools", "count": 1}], **changes)
    problem = dataclasses.replace(problem, compressible=tuple(range(len(problem.stream.names))))
    chosen, report = solve_design(problem)
    e = evaluate_design(problem, chosen)
    assert report.status == "optimal" and chosen.rule == (2000, 1200, 5.0) and chosen.instances[1] == 0
    assert e.feasible and not e.violations and e.cost_per_hour == pytest.approx(report.objective)
    from optfleet.problems.routing.spill_design import design_spill

    _, searched = design_spill(problem, chosen)  # spillover never reaches the empty pool: it stays empty
    assert all(o.meets and o.spill.instances[1] == 0 and o.evaluation.pools[1].requests == 0 for o in searched)


@pytest.mark.parametrize(("gpus", "feasible"), [(0, True), (3, False)])
def test_a_fixed_pool_the_design_cannot_have_is_trivial_at_zero_and_infeasible_above(tmp_path, gpus, feasible):
    # the toy fleet's long pool is at 4,000 tokens; no design pool lies at 3,000
    problem = _toy_routing(tmp_path, [{"kind": "fixed", "window_tokens": 3000, "instances": gpus}])
    if feasible:
        chosen, report = solve_design(problem)
        assert report.status == "optimal"
    else:
        with pytest.raises(InfeasibleError, match=r"without constraints\[0\] \(fixed; least \$[\d,.]+/h without it\) a design exists"):
            solve_design(problem)


@pytest.mark.parametrize(("windows", "says"), [([0], "greater than or equal to 1"), ([-5], "greater than or equal to 1"),
                                               ([4000], "below the long pool's 4000 tokens")])
def test_validate_refuses_a_design_window_the_design_would(tmp_path, capsys, windows, says):
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(_tiny(**{"design.short_windows_tokens": windows})))
    assert main(["validate", str(path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "design.short_windows_tokens" in err and says in err


def test_epsilon_zero_asks_for_a_design_without_misroutes(tmp_path):
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(_tiny(**{"design.epsilon": 0.0})))
    problem = prepare(load_instance(path))
    chosen, report = solve_design(problem)
    assert report.status == "optimal" and evaluate_design(problem, chosen).misroute_probability == 0.0


def test_a_boundary_without_a_kv_slot_is_refused(tmp_path, capsys):
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(_tiny(**{"fleet.boundary_tokens": 3000})))  # the toy's slot table has 2,000 and 4,000 only
    assert main(["validate", str(path)]) == EXIT_BAD_INPUT
    assert "fleet.boundary_tokens = 3000" in capsys.readouterr().err


@pytest.mark.parametrize(("seed", "spread", "gamma"), [(2, 0.3, 1.5), (3, 0.5, 2.0), (4, 0.2, 4.0), (5, 0.6, 1.2), (6, 0.4, 1.5)])
def test_hindsight_bounds_every_router_under_large_estimate_errors(seed, spread, gamma):
    """Wide bytes-per-token spreads put estimates far from the truth (band requests above gamma B or within B,
    mis-routes): the hindsight optimum still bounds every router, for the work above the capacity windows (always
    defined) and, where the placement fits them, for busy instances; the compressor's refusals keep every router
    placement among the model's options."""
    changes = {"stream.seed": seed, "stream.bytes_per_token_spread": spread, "fleet.gamma": gamma, "exact.window_s": 5.0}
    overflow = prepare(load_instance(_tiny(**changes, **{"exact.objective": "overflow"})))
    _, report = hindsight(overflow)
    busy = prepare(load_instance(_tiny(**changes)))
    try:
        busy_bound = hindsight(busy)[1].bound
    except InfeasibleError:
        busy_bound = None
    for name, calibrator in overflow.calibrators.items():
        e = evaluate(overflow, replay_router(overflow, calibrator), needed=False)
        assert e.overflow_slot_s >= report.bound * (1 - 1e-9) - 1e-9, name
        if busy_bound is not None and e.capacity_ok:
            assert e.busy_instances >= busy_bound - 1e-6, name


def test_a_bad_field_of_a_written_plan_is_named_under_the_fleet_block(tmp_path, capsys):
    plan = {"pools": [{"name": "short", "window_tokens": 2000, "instances": 3, "gpu": "FOO"}, {"name": "long", "window_tokens": 4000, "instances": 4}]}
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(_tiny(**{"fleet.boundary_tokens": None, "fleet.plan": plan})))
    assert main(["validate", str(path)]) == EXIT_BAD_INPUT
    assert "error: fleet.plan.pools" in capsys.readouterr().err


def test_a_stream_files_clock_does_not_matter(tmp_path):
    """The replay starts each pool in equilibrium at time 0 and estimates its rate from the last arrival: a file's
    times shifted by -5 s or +1000 s replay alike (-5 s once made every pool's P99 TTFT seconds)."""
    def rows(shift: float) -> dict:
        path = _write_stream(tmp_path / str(shift), [f"{i * 0.05 + shift}," + r.split(",", 1)[1] for i, r in enumerate(ROWS * 30)])
        return {r["method"]: {k: (float(f"{v:.9g}") if isinstance(v, float) else v) for k, v in r.items() if k != "seconds"}
                for r in optfleet.run_gap(path).rows}  # to 9 digits: shifting the times rounds them

    assert rows(-5.0) == rows(0.0) == rows(1000.0)
