"""The capacity_plan kind (issue 37): the MILP against brute force, the evaluator against hand-worked schedules,
the spot quantile, the demand readers and bad input."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pyomo.environ as pyo
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from optfleet.cli import main
from optfleet.errors import EXIT_BAD_INPUT, InfeasibleError, InputError
from optfleet.instance import load_instance
from optfleet.models.capacity_plan import build
from optfleet.problems.capacity_plan.evaluator import evaluate
from optfleet.problems.capacity_plan.exact import lp_bound, solve_milp
from optfleet.problems.capacity_plan.plan import Schedule, gpus_in_use
from optfleet.problems.capacity_plan.problem import prepare
from optfleet.problems.capacity_plan.rolling import rolling_horizon
from optfleet.problems.capacity_plan.spot import counted_spot
from optfleet.solvers import highs

from support import REPO

TINY = REPO / "instances" / "capacity_plan" / "tiny.yaml"


def tiny(**overrides):
    return prepare(load_instance(TINY, **overrides))


# --- the spot quantile ------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 30), st.floats(0.0, 0.9), st.floats(0.01, 0.999))
def test_counted_spot_is_the_binomial_quantile(cap, p, c):
    """k(s) survives with probability >= c, k(s) + 1 does not, and k never falls as s grows."""
    k = counted_spot(cap, p, c)
    assert k[0] == 0 and (np.diff(k) >= 0).all()
    for s in range(cap + 1):
        survive = lambda n: binom.sf(n - 1, s, 1 - p) if n > 0 else 1.0  # noqa: E731
        assert survive(k[s]) >= c - 1e-9
        assert k[s] == s or survive(k[s] + 1) < c + 1e-9


def test_full_confidence_counts_no_preemptible_spot():
    assert counted_spot(5, 0.1, 1.0).tolist() == [0] * 6
    assert counted_spot(3, 0.0, 1.0).tolist() == [0, 1, 2, 3]


# --- the MILP against brute force ------------------------------------------------------------------------------


def _cheapest_purchases(problem, g: int, use: np.ndarray) -> float:
    """The least cost of type ``g``'s purchases holding ``use[t]`` GPUs in every period, by enumerating every
    reserved start, on-demand and spot count (spot checked by the binomial tail directly, not by k(s))."""
    offer, periods = problem.offers[g], problem.periods
    need = np.ceil(use - 1e-9).astype(int)
    top = int(need.max())
    r_range = range(top + 1) if offer.reserved_term_periods is not None else [0]
    o_range = range(min(top, offer.on_demand_max_gpus if offer.on_demand_max_gpus is not None else top) + 1) \
        if offer.on_demand_per_gpu_period is not None else [0]
    best = np.inf
    for starts in itertools.product(r_range, repeat=periods):
        held = [sum(starts[max(0, t - (offer.reserved_term_periods or 1) + 1): t + 1]) for t in range(periods)]
        if offer.reserved_max_gpus is not None and max(held) > offer.reserved_max_gpus:
            continue
        cost = sum(starts) * (offer.reserved_cost_per_gpu or 0.0)
        for t in range(periods):
            period_best = np.inf
            for o in o_range:
                for s in range(int(offer.spot_cap[t]) + 1):
                    relied = need[t] - held[t] - o
                    ok = relied <= 0 or binom.sf(relied - 1, s, 1 - offer.spot_preemption_probability) >= offer.spot_confidence - 1e-9
                    if ok:
                        period_best = min(period_best, o * (offer.on_demand_per_gpu_period or 0.0) + s * (offer.spot_per_gpu_period or 0.0))
            cost += period_best
        best = min(best, cost)
    return best


def every_assignment(problem):
    """Every ``(gpu_type, instances)``: a usable type per model and period, instances from the need up to the
    horizon's largest."""
    table = problem.table
    n_models, periods = len(problem.model_names), problem.periods
    choices = []
    for m in range(n_models):
        for t in range(periods):
            options = [(g, x) for g in range(len(problem.offers)) if table.instances[m, g, t] > 0
                       for x in range(table.instances[m, g, t], table.instances[m, g].max() + 1)]
            choices.append(options or [(-1, 0)])
    for pick in itertools.product(*choices):
        yield (np.array([g for g, _ in pick]).reshape(n_models, periods), np.array([x for _, x in pick]).reshape(n_models, periods))


def brute_force(problem) -> float:
    """The least cost over every assignment with each type's purchases enumerated; no constraints (each type is then
    independent)."""
    best = np.inf
    for gpu_type, instances in every_assignment(problem):
        use = gpus_in_use(problem, gpu_type, instances)
        best = min(best, sum(_cheapest_purchases(problem, g, use[g]) for g in range(len(problem.offers))))
    return best


@pytest.mark.parametrize("overrides", [
    {"periods": 2, "gpus__0__reserved__term_periods": 2},
    {"periods": 2, "gpus__0__reserved__term_periods": 1, "models__0__load_time_s": 0},
    {"periods": 2, "gpus__0__reserved__term_periods": 2, "gpus__1__spot__confidence": 0.7, "gpus__0__on_demand__max_gpus": 1},
], ids=["load-time", "no-load-term-2", "spot-heavy"])
def test_milp_equals_brute_force(overrides):
    problem = tiny(**overrides)
    schedule, report = solve_milp(problem)
    assert report.status == "optimal" and report.gap is not None and report.bound is not None
    evaluation = evaluate(problem, schedule)
    assert evaluation.feasible, evaluation.violations
    assert evaluation.total_cost == pytest.approx(report.objective, rel=1e-9)
    assert report.objective == pytest.approx(brute_force(problem), rel=1e-9)
    assert 0 < lp_bound(problem) <= report.objective + 1e-9  # the relaxation's optimum bounds the brute-force optimum


def _optimum(problem, relaxed: bool, off: tuple[str, ...] = ()) -> float:
    """The MILP's optimum (its LP relaxation's when ``relaxed``), with the row families named in ``off`` left out."""
    model = build(problem)
    for rows in off:
        getattr(model, rows).deactivate()
    if relaxed:
        pyo.TransformationFactory("core.relax_integer_vars").apply_to(model)
    report = highs.solve(model)
    assert report.status == "optimal"
    return report.objective


@pytest.mark.parametrize("overrides, lifts", [
    ({"periods": 2, "gpus__0__reserved__term_periods": 2, "gpus__0__reserved__max_gpus": 2}, True),
    ({"periods": 2, "gpus__0__reserved__term_periods": 2, "gpus__0__reserved__max_gpus": 3, "gpus__0__on_demand__max_gpus": 1}, True),
    ({"periods": 2, "gpus__0__reserved__term_periods": 2, "gpus__0__reserved__max_gpus": 2,
     "reservations": [{"gpu_type": "H100", "gpus": 1, "start_period": 0, "end_period": 2, "model": "batch"},
                      {"gpu_type": "A100", "gpus": 1, "start_period": 1, "end_period": 2}]}, False),
], ids=["reserved-cap", "reserved-and-on-demand-caps", "caps-and-reservations-held"])
def test_residual_capacity_rows_lift_the_lp_and_keep_every_plan(overrides, lifts):
    """The rows are valid (the MILP with and without them has the brute-force optimum, and the LP with them stays
    below it); where ``lifts``, they cut (the LP with them is higher; with the reservations held, the held GPUs
    widen every ``D`` and the rows left do not bind at the LP's optimum).  The load-rounding rows are left out of
    the LPs compared: they lift these LPs further and would hide what the residual rows add."""
    problem = tiny(**overrides)
    best = brute_force_with_held(problem)
    assert len(build(problem).residual_capacity) > 0
    assert _optimum(problem, relaxed=False) == pytest.approx(best, rel=1e-9)
    assert _optimum(problem, relaxed=False, off=("residual_capacity",)) == pytest.approx(best, rel=1e-9)
    lifted = _optimum(problem, relaxed=True, off=("load_rounding",))
    plain = _optimum(problem, relaxed=True, off=("load_rounding", "residual_capacity"))
    assert lifted <= best + 1e-9 and (plain < lifted - 1e-6) == lifts


@pytest.mark.parametrize("overrides, rows, lp_without, lp_with", [
    ({"periods": 2, "gpus__0__reserved__term_periods": 2}, 6, 48.656, 57.6),
    ({"periods": 2, "gpus__0__reserved__term_periods": 2, "models__1__load_time_s": 300}, 10, 49.039, 57.6),
    ({"periods": 2, "gpus__0__reserved__term_periods": 2, "gpus__0__reserved__max_gpus": 2,
     "reservations": [{"gpu_type": "H100", "gpus": 1, "start_period": 0, "end_period": 2, "model": "batch"},
                      {"gpu_type": "A100", "gpus": 1, "start_period": 1, "end_period": 2}]}, 3, None, None),
], ids=["chat-loads", "both-load", "pinned-held-skipped"])
def test_load_rounding_rows_keep_every_plan_and_lift_the_lp(overrides, rows, lp_without, lp_with):
    """The rows remove no plan (the MILP with and without them has the brute-force optimum) and price a load in
    whole GPUs: on tiny's first two periods chat (10 minutes' load in 4 hours) adds an instance in period 1, and
    the LP, which covered that 1/24 of a GPU with 1/24 of a purchase, rises to the optimum.  Where GPUs pinned
    to a model are held in a period on a type, that type's rows are left out there (3 rows instead of 6)."""
    problem = tiny(**overrides)
    best = brute_force_with_held(problem)
    assert len(build(problem).load_rounding) == rows
    assert _optimum(problem, relaxed=False) == pytest.approx(best, rel=1e-9)
    assert _optimum(problem, relaxed=False, off=("load_rounding",)) == pytest.approx(best, rel=1e-9)
    with_rows, without = _optimum(problem, relaxed=True), _optimum(problem, relaxed=True, off=("load_rounding",))
    assert without - 1e-9 <= with_rows <= best + 1e-9
    if lp_with is not None:
        assert (without, with_rows) == (pytest.approx(lp_without, abs=1e-3), pytest.approx(lp_with, rel=1e-9))


def test_load_rounding_rows_cut_off_no_assignment():
    """For every assignment of tiny's first two periods (each model's type and instances), the MILP with the
    assignment fixed, rows included, costs what the cheapest purchases for its GPUs in use cost (enumerated): the
    rows remove no integer plan, not only none of the optimal ones."""
    problem = tiny(periods=2, gpus__0__reserved__term_periods=2)
    checked = 0
    for gpu_type, instances in every_assignment(problem):
        model = build(problem)
        if any(gpu_type[i, t] >= 0 and (i, gpu_type[i, t], t) not in model.x and instances[i, t] != problem.table.instances[i, gpu_type[i, t], t]
               for i in range(2) for t in range(2)):
            continue  # a model without load time runs exactly its need (x = n y): not a plan of the MILP's space
        for i, g, t in model.Y:
            model.y[i, g, t].fix(int(gpu_type[i, t] == g))
            if (i, g, t) in model.x:
                model.x[i, g, t].fix(int(instances[i, t]) if gpu_type[i, t] == g else 0)
        use = gpus_in_use(problem, gpu_type, instances)
        cheapest = sum(_cheapest_purchases(problem, g, use[g]) for g in range(len(problem.offers)))
        assert highs.solve(model).objective == pytest.approx(cheapest, rel=1e-9), (gpu_type.tolist(), instances.tolist())
        checked += 1
    assert checked == 32


# --- the evaluator against hand-worked schedules ----------------------------------------------------------------


def _hand_schedule(problem, spot_t0: int = 3) -> Schedule:
    """chat on A100 all day, batch on H100; A100: 5 reserved at 0 and 3 (term 3); H100: 1 on demand in period 0,
    spot 3, 3, 3, 2, 3, 3."""
    periods = problem.periods
    needs = problem.table.instances
    return Schedule(gpu_type=np.array([[0] * periods, [1] * periods]), instances=np.array([needs[0, 0], needs[1, 1]]),
                    reserved_starts=np.array([[5, 0, 0, 5, 0, 0], [0] * periods]),
                    on_demand_gpus=np.array([[0] * periods, [1, 0, 0, 0, 0, 0]]),
                    spot_gpus=np.array([[0] * periods, [spot_t0, 3, 3, 2, 3, 3]]))


def test_evaluator_on_a_hand_worked_schedule():
    """Needs (tiny.yaml, checked below): chat 2 3 4 5 4 3 on A100, batch 3 2 2 1 2 2 on H100; no load time.
    Cost: reserved 2 x 5 x $14.40 = $144; on-demand 1 x $14 = $14; spot 17 x $6 = $102: $260.  By model: the A100's
    5 reserved GPUs cost $4.80 per GPU-period, all chat's: $144; batch the H100's $116.  Chance: period 0 relies on 2
    of 3 spot GPUs, P(Binomial(3, 0.9) >= 2) = 0.972 >= 0.9; period 3 on 1 of 2, 0.99."""
    problem = tiny(models__0__load_time_s=0, evaluation__samples=4000)
    assert problem.table.instances[0, 0].tolist() == [2, 3, 4, 5, 4, 3]
    assert problem.table.instances[1, 1].tolist() == [3, 2, 2, 1, 2, 2]
    e = evaluate(problem, _hand_schedule(problem))
    assert e.feasible, e.violations
    assert e.total_cost == pytest.approx(260.0)
    assert e.cost_by_option == pytest.approx({"reserved": 144.0, "on_demand": 14.0, "spot": 102.0})
    assert e.cost_by_model == pytest.approx({"chat": 144.0, "batch": 116.0, "unassigned": 0.0})
    assert e.attainment[0].tolist() == [1.0] * 6
    exact = [binom.sf(1, 3, 0.9), binom.sf(1, 3, 0.9), binom.sf(1, 3, 0.9), binom.sf(0, 2, 0.9), binom.sf(1, 3, 0.9), binom.sf(1, 3, 0.9)]
    assert e.attainment[1] == pytest.approx(exact, abs=0.02)  # 4,000 samples: standard error < 0.003


def test_evaluator_names_the_period_and_the_rule_broken():
    problem = tiny(models__0__load_time_s=0)
    short = _hand_schedule(problem, spot_t0=2)  # period 0 relies on 2 of 2 spot GPUs: 0.81 < 0.9
    fewer = Schedule(short.gpu_type, short.instances - np.array([[0, 0, 1, 0, 0, 0], [0] * 6]), short.reserved_starts,
                     short.on_demand_gpus, short.spot_gpus)
    violations = evaluate(problem, fewer).violations
    assert any(v.startswith("period 2, model chat: 3 instances on A100, below the 4") for v in violations), violations
    assert any(v.startswith("period 0, H100") and "0.81 < the spot confidence 0.9" in v for v in violations), violations


def test_load_time_is_charged_on_the_gpus_that_start_serving():
    """tiny's chat loads for 600 s of a 4-h period: 1/24 of a GPU-period per GPU it adds."""
    problem = tiny()
    s = _hand_schedule(problem)
    use = gpus_in_use(problem, s.gpu_type, s.instances)
    chat = np.array([2, 3, 4, 5, 4, 3])
    assert use[0] == pytest.approx(chat + np.maximum(np.diff(chat, prepend=0), 0) / 24)


# --- infeasibility, demand, bad input ---------------------------------------------------------------------------


def test_an_impossible_budget_is_named():
    problem = tiny(periods=2, gpus__0__reserved__term_periods=2, constraints=[{"kind": "budget", "max_cost": 10}])
    with pytest.raises(InfeasibleError, match=r"constraints\[0\] \(budget\) excludes every plan"):
        solve_milp(problem)


def test_a_model_no_type_can_hold_is_named():
    """chat needs 2 GPUs in period 0; A100 holds 1 reserved, H100 one spot GPU (counted 1)."""
    problem = tiny(periods=2, gpus__0__reserved__term_periods=2, gpus__0__reserved__max_gpus=1, gpus__0__on_demand__max_gpus=0,
                   gpus__1__on_demand__max_gpus=0, gpus__1__spot__max_gpus=1)
    with pytest.raises(InfeasibleError, match=r"period 0, model chat: no GPU type can hold it"):
        solve_milp(problem)


def test_a_period_whose_models_do_not_fit_together_is_named():
    """In period 0 chat needs 2 GPUs and batch 3: each fits alone on the A100's 3 (1 reserved, 2 on demand), not both;
    the H100 holds 1."""
    problem = tiny(periods=2, gpus__0__reserved__term_periods=2, gpus__0__reserved__max_gpus=1, gpus__0__on_demand__max_gpus=2,
                   gpus__1__on_demand__max_gpus=1, gpus__1__spot__max_gpus=0)
    with pytest.raises(InfeasibleError, match=r"period 0: the models together need more GPUs than the types' caps hold"):
        solve_milp(problem)


def _with_forecast(tmp_path, text: str):
    document = yaml.safe_load(TINY.read_text())
    document["demand"] = {"forecast_file": "demand.csv"}
    document["periods"] = 2
    document["gpus"][0]["reserved"]["term_periods"] = 2
    (tmp_path / "demand.csv").write_text(text)
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_a_forecast_table_is_read_per_model_and_period(tmp_path):
    path = _with_forecast(tmp_path, "period,model,rate_rps\n0,chat,5\n1,chat,7.5\n1,batch,2\n0,batch,0\n")
    problem = prepare(load_instance(path))
    assert problem.rates_rps.tolist() == [[5.0, 7.5], [0.0, 2.0]]
    assert problem.table.instances[1, :, 0].tolist() == [0, 0]  # batch's replica floor is 0: no traffic, no instance


@pytest.mark.parametrize(("text", "field", "says"), [
    ("period,model,rate_rps\n0,chat,5\n1,chat,7\n0,batch,2\n", "demand.forecast_file:period", "model batch has no rate"),
    ("period,model,rate_rps\n0,chat,5\n1,chat,7\n0,batch,2\n1,llama,3\n", "demand.forecast_file:model", "llama"),
    ("period,model,rate_rps\n0,chat,5\n1,chat,-7\n0,batch,2\n1,batch,3\n", "demand.forecast_file:rate_rps", "-7"),
    ("period,model\n0,chat\n", "demand.forecast_file", "rate_rps"),
], ids=["gap", "unknown-model", "negative-rate", "no-column"])
def test_bad_forecasts_exit_2_naming_the_field(tmp_path, capsys, text, field, says):
    path = _with_forecast(tmp_path, text)
    assert main(["solve", str(path), "--out", str(tmp_path / "out")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {field} = ") and says in err[0], err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("overrides", "field"), [
    ({"gpus__1__spot__confidence": 0}, "gpus.1.spot.confidence"),
    ({"gpus__1__spot__confidence": 1.5}, "gpus.1.spot.confidence"),
    ({"gpus__0__reserved__term_periods": 7}, "gpus[0].reserved.term_periods"),
    ({"gpus__1__spot__max_gpus": [1, 2]}, "gpus[1].spot.max_gpus"),
    ({"models__0__tp": {"B200": 1}}, "models[0].tp.B200"),
    ({"models__0__service__slo__ttft_p99_ms": -1}, "models[0].service.slo.ttft_p99_ms"),
    ({"gpus__1__gpu": "H900"}, "gpus[1].gpu"),
    ({"constraints": [{"kind": "gpu_mix", "gpu": "TPU", "max_share": 0.5}]}, "constraints[0].gpu"),
], ids=["confidence-0", "confidence-1.5", "term-beyond-horizon", "spot-caps-per-period", "tp-unknown-type", "service-slo",
        "unknown-gpu", "mix-unknown-type"])
def test_bad_input_names_the_field(overrides, field):
    with pytest.raises(InputError) as caught:
        tiny(**overrides)
    assert caught.value.field == field


def test_json_is_one_document_with_the_schedule(capsys, tmp_path):
    assert main(["solve", str(TINY), "--json", "--quiet", "--out", str(tmp_path / "out")]) == 0
    body = json.loads(capsys.readouterr().out)
    (main_row,) = body["results"]
    assert main_row["method"] == "milp" and main_row["status"] == "optimal" and main_row["gap_pct"] == 0
    assert set(main_row["schedule"]["models"]) == {"chat", "batch"}
    assert sum(main_row["cost_by_option"].values()) == pytest.approx(main_row["objective"])
    assert (tmp_path / "out" / "schedule.csv").read_text().startswith("period,gpu_type,reserved_starts")


def test_gap_plot_draws_the_milp_schedule(tmp_path, capsys):
    png = tmp_path / "plan.png"
    assert main(["gap", str(TINY), "--quiet", "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


# --- SkyPilot catalog prices ------------------------------------------------------------------------------------

VMS_CSV = """InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GPUInfo,Region,AvailabilityZone,Price,SpotPrice
p5.48xlarge,192,2048,H100,8,,us-east-1,us-east-1a,98.32,40.00
p5.48xlarge,192,2048,H100,8,,us-east-1,us-east-1b,98.32,36.00
p5.48xlarge,192,2048,H100,8,,us-west-2,us-west-2a,98.32,
p4de.24xlarge,96,1152,A100-80GB,8,,us-east-1,us-east-1a,40.96,16.00
"""


def _with_catalog(tmp_path, **catalog):
    document = yaml.safe_load(TINY.read_text())
    (tmp_path / "vms.csv").write_text(VMS_CSV)
    h100 = document["gpus"][1]
    h100["skypilot_catalog"] = {"file": "vms.csv", "instance_type": "p5.48xlarge", "region": "us-east-1", **catalog}
    del h100["on_demand"]["price_per_gpu_hour"], h100["spot"]["price_per_gpu_hour"]
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_prices_are_read_from_a_skypilot_catalog(tmp_path):
    """On demand $98.32 / 8 GPUs; spot the cheaper zone's $36.00 / 8, per GPU-hour, times the 4-h period."""
    offer = prepare(load_instance(_with_catalog(tmp_path))).offers[1]
    assert offer.on_demand_per_gpu_period == pytest.approx(98.32 / 8 * 4)
    assert offer.spot_per_gpu_period == pytest.approx(36.0 / 8 * 4)


@pytest.mark.parametrize(("catalog", "says"), [
    ({"region": "eu-west-1"}, "has no row in region eu-west-1"),
    ({"instance_type": "p4de.24xlarge"}, "holds A100-80GB, not the GPU type's H100-SXM"),
    ({"region": "us-west-2"}, "spot price"),
], ids=["region", "wrong-gpu", "no-spot-price"])
def test_a_catalog_without_the_price_exits_2_naming_the_field(tmp_path, capsys, catalog, says):
    assert main(["validate", str(_with_catalog(tmp_path, **catalog))]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "gpus[1]" in err[0] and says in err[0], err


# --- demand binned from request traces --------------------------------------------------------------------------


def _with_traces(tmp_path, chat_times: list[float]):
    document = yaml.safe_load(TINY.read_text())
    document["periods"] = 2
    document["gpus"][0]["reserved"]["term_periods"] = 2
    document["demand"] = {"traces": {name: {"file": f"{name}.csv", "time_unit": "s"} for name in ("chat", "batch")}}
    (tmp_path / "chat.csv").write_text("t,input_tokens,output_tokens\n" + "".join(f"{t},100,10\n" for t in chat_times))
    (tmp_path / "batch.csv").write_text("t,input_tokens,output_tokens\n0,100,10\n20000,100,10\n25000,100,10\n")
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_a_trace_is_binned_by_period(tmp_path):
    """4-h periods (14,400 s): chat has 2 requests in period 0 and 1 in period 1; a request after the horizon is
    left out."""
    problem = prepare(load_instance(_with_traces(tmp_path, [0, 100, 14_405, 40_000])))
    assert problem.rates_rps * 14_400 == pytest.approx(np.array([[2, 1], [1, 2]]))


def test_a_trace_ending_before_the_last_period_exits_2(tmp_path, capsys):
    assert main(["validate", str(_with_traces(tmp_path, [0, 100]))]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: demand.traces.chat = ") and "ends before the horizon's last period" in err[0], err


# --- rolling horizon --------------------------------------------------------------------------------------------


def test_rolling_horizon_with_one_window_is_the_milp():
    problem = tiny(rolling__window_periods=6, rolling__step_periods=6)
    assert evaluate(problem, rolling_horizon(problem)).total_cost == pytest.approx(solve_milp(problem)[1].objective, rel=1e-9)


def test_rolling_horizon_windows_give_a_feasible_plan_above_the_bound():
    """Windows of 4 periods, 2 committed: the reservations made in committed periods are held into the next
    window, so the plan is feasible; it is no cheaper than the MILP's optimum."""
    problem = tiny(rolling__window_periods=4, rolling__step_periods=2)
    evaluation = evaluate(problem, rolling_horizon(problem))
    assert evaluation.feasible, evaluation.violations
    assert evaluation.total_cost >= solve_milp(problem)[1].bound - 1e-9


def test_the_capacity_table_equals_sizing_every_rate():
    """The table sizes only the ends of runs of equal counts (N is non-decreasing in the rate); it equals the
    fleet's homogeneous count at every rate."""
    from dataclasses import replace

    from optfleet.problems.capacity_plan.capacity import instances_needed, service_problem
    from optfleet.problems.fleet.heuristics.baselines import homogeneous

    spec = load_instance(TINY).spec
    fleet = service_problem(spec.models[0], spec.gpus[0], 1, TINY.parent, "models[0].service")
    rates = np.linspace(0.0, 40.0, 57)
    counts, reason = instances_needed(fleet, rates)
    assert reason == ""
    assert counts.tolist() == [0] + [homogeneous(replace(fleet, rate_rps=float(r))).pools[0].instances for r in rates[1:]]


@settings(max_examples=8, deadline=None)
@given(st.floats(-0.2, 0.5), st.floats(0.0, 1.0))
def test_models_sharing_a_service_are_sized_together_with_the_counts_of_each_alone(growth, amplitude):
    """tiny's chat and batch share one service: the table sizes them over the union of their rates; every entry is
    the count of sizing that model alone (instances_needed over its own rates), its replica floor applied."""
    from optfleet.problems.capacity_plan.capacity import instances_needed, service_problem

    problem = tiny(demand__growth_per_day=growth, demand__generator__batch__daily_amplitude=amplitude)
    spec = problem.spec
    for m, model in enumerate(spec.models):
        for g, gpu in enumerate(spec.gpus):
            alone, _ = instances_needed(service_problem(model, gpu, 1, TINY.parent, "models"), problem.rates_rps[m])
            assert problem.table.instances[m, g].tolist() == np.maximum(alone, model.min_replicas).tolist()


def test_demand_grows_by_the_daily_rate_compounded():
    """4-h periods: period t's rate is the generator's times 1.06^(t / 6)."""
    assert tiny(demand__growth_per_day=0.06).rates_rps == pytest.approx(tiny().rates_rps * 1.06 ** (np.arange(6) / 6))


def test_the_cheaper_of_the_rules_and_the_assignment_search_plan_is_a_feasible_mip_start():
    """On tiny, reserve_percentile's plan costs $188.80 and the assignment search's (the LP's integral types fixed,
    the rest searched with relaxed counts, then its types fixed) $180.80; the cheaper is handed to HiGHS, which
    accepts it; the optimum, $178.80, is below both, and the assignment relaxation's bound ($177.60, the LP's
    here) below that."""
    import time

    from optfleet.problems.capacity_plan.exact import assignment_bound, assignment_plan, best_rule_plan, lp_relaxation

    problem = tiny()
    rule = best_rule_plan(problem)
    assert rule.method == "reserve_percentile" and evaluate(problem, rule).total_cost == pytest.approx(188.8)
    relaxed, _ = lp_relaxation(problem)
    plan = assignment_plan(problem, relaxed, time.perf_counter() + 10, time.perf_counter() + 20)
    assert evaluate(problem, plan).feasible and evaluate(problem, plan).total_cost == pytest.approx(180.8)
    assert assignment_bound(problem, plan, time.perf_counter() + 10).bound == pytest.approx(177.6)
    _, report = solve_milp(problem)
    assert report.counts["feasible_mip_starts"] == 1 and "MIP start solution is feasible: objective value is 180.8" in report.log
    assert report.objective == pytest.approx(178.8)


def test_a_plan_within_the_gap_of_the_assignment_bound_is_reported_optimal_without_the_full_milp():
    """With a 20 % gap asked, tiny's start ($180.80) is within it of the assignment relaxation's bound ($177.60):
    the report is optimal at that gap, from the assignment search, and no full MILP is run."""
    schedule, report = solve_milp(tiny(solve__mip_gap=0.2))
    assert report.status == "optimal" and report.objective == pytest.approx(180.8) and report.bound == pytest.approx(177.6)
    assert report.gap == pytest.approx((180.8 - 177.6) / 180.8) and "assignment search" in report.log
    assert evaluate(tiny(solve__mip_gap=0.2), schedule).total_cost == pytest.approx(180.8)


def test_rolling_horizon_keeps_the_reserved_cap_across_windows():
    """With at most 6 reserved A100s and 3-period terms, a window may not reserve on top of what an earlier window's
    reservations still hold beyond the cap."""
    problem = tiny(rolling__window_periods=2, rolling__step_periods=1, gpus__0__reserved__max_gpus=6)
    evaluation = evaluate(problem, rolling_horizon(problem))
    assert evaluation.feasible, evaluation.violations


# --- reservations already held ----------------------------------------------------------------------------------

HELD = [{"gpu_type": "A100", "gpus": 2, "start_period": 0, "term_periods": 3, "model": "chat", "price_per_gpu_hour": 1.0},
        {"gpu_type": "H100", "gpus": 1, "start_period": 3, "end_period": 9, "price_per_gpu_hour": 2.0},
        {"gpu_type": "A100", "gpus": 1, "start_period": 0, "end_period": 6, "model": "batch"}]
"""Two GPUs pinned to chat on the A100 in periods 0-2, one unpinned H100 in periods 3-5 (its term runs past the
horizon: clipped), one A100 pinned to batch all day."""


def brute_force_with_held(problem) -> float:
    """brute_force with each type's purchases sized for ``use - P - sum_m min(u_m, Q_m)``: the GPUs in use beyond the
    unpinned reservations held (``P``) and the pinned ones each model uses (``Q``), per-model use computed by
    running gpus_in_use on each model alone."""
    held, n_models = problem.held, len(problem.model_names)
    best = np.inf
    for gpu_type, instances in every_assignment(problem):
        alone = [gpus_in_use(problem, np.where(np.arange(n_models)[:, None] == m, gpu_type, -1), instances) for m in range(n_models)]
        beyond = sum(alone) - held.pool - sum(np.minimum(alone[m], held.pinned[m]) for m in range(n_models))
        best = min(best, sum(_cheapest_purchases(problem, g, np.maximum(beyond[g], 0)) for g in range(len(problem.offers))))
    return best


@pytest.mark.parametrize("reservations", [
    [{"gpu_type": "A100", "gpus": 2, "start_period": 1, "term_periods": 1}],
    [{"gpu_type": "H100", "gpus": 2, "start_period": 0, "end_period": 2, "model": "batch"},
     {"gpu_type": "A100", "gpus": 1, "start_period": 0, "end_period": 1, "model": "chat"}],
], ids=["pool", "pinned"])
def test_milp_equals_brute_force_with_reservations_held(reservations):
    problem = tiny(periods=2, gpus__0__reserved__term_periods=2, reservations=reservations)
    schedule, report = solve_milp(problem)
    assert report.status == "optimal" and report.bound is not None
    evaluation = evaluate(problem, schedule)
    assert evaluation.feasible, evaluation.violations
    assert evaluation.total_cost == pytest.approx(report.objective, rel=1e-9)
    assert report.objective == pytest.approx(brute_force_with_held(problem), rel=1e-9)
    assert report.objective < solve_milp(tiny(periods=2, gpus__0__reserved__term_periods=2))[1].objective - 1.0


def _hand_schedule_with_held(problem) -> Schedule:
    """chat on A100, batch on H100 (needs as in the hand-worked schedule above); A100: 3 reserved at 0, 5 at 3 (with
    chat's 2 held in periods 0-2: 5 in every period); H100: 1 on demand in period 0, spot 3, 3, 3, 0, 2, 2."""
    needs = problem.table.instances
    return Schedule(gpu_type=np.array([[0] * 6, [1] * 6]), instances=np.array([needs[0, 0], needs[1, 1]]),
                    reserved_starts=np.array([[3, 0, 0, 5, 0, 0], [0] * 6]),
                    on_demand_gpus=np.array([[0] * 6, [1, 0, 0, 0, 0, 0]]),
                    spot_gpus=np.array([[0] * 6, [3, 3, 3, 0, 2, 2]]))


def test_evaluator_on_a_hand_worked_schedule_with_reservations_held():
    """Needs: chat 2 3 4 5 4 3 on A100, batch 3 2 2 1 2 2 on H100.  A100: 2 held for chat in 0-2 + reserved 3, 3, 3,
    5, 5, 5 = 5 in every period; batch's pinned A100 idles (chat may not use it).  H100: the unpinned one held in 3-5
    leaves 3 2 2 0 1 1 to buy: on demand 1 in period 0 and spot relied on 2 of 3 (0.972), none, 1 of 2 (0.99).
    Cost: reserved 8 x $14.40 = $115.20, on demand $14, spot 13 x $6 = $78: $207.20.  Sunk (not in it): 2 GPUs x $1 x
    4 h x 3 periods + 1 x $2 x 4 h x 3 periods (clipped to the horizon) = $48."""
    problem = tiny(models__0__load_time_s=0, evaluation__samples=4000, reservations=HELD)
    assert problem.held.pool.tolist() == [[0] * 6, [0, 0, 0, 1, 1, 1]]
    assert problem.held.pinned[0].tolist() == [[2, 2, 2, 0, 0, 0], [0] * 6] and problem.held.pinned[1, 0].tolist() == [1] * 6
    e = evaluate(problem, _hand_schedule_with_held(problem))
    assert e.feasible, e.violations
    assert e.total_cost == pytest.approx(207.2)
    assert e.cost_by_option == pytest.approx({"reserved": 115.2, "on_demand": 14.0, "spot": 78.0})
    assert e.cost_by_model == pytest.approx({"chat": 115.2, "batch": 92.0, "unassigned": 0.0})
    assert e.sunk_cost == pytest.approx(48.0)
    exact = [binom.sf(1, 3, 0.9)] * 3 + [1.0, binom.sf(0, 2, 0.9), binom.sf(0, 2, 0.9)]
    assert e.attainment[1] == pytest.approx(exact, abs=0.02)
    without = evaluate(tiny(models__0__load_time_s=0), _hand_schedule_with_held(problem)).violations
    assert any(v.startswith("period 2, A100") for v in without) and any(v.startswith("period 3, H100") for v in without), without


def test_the_rules_buy_only_beyond_the_reservations_held():
    """Every rule's plan costs no more with the reservations held than without them; greedy_packing (the rule that
    keeps to the caps) stays feasible; the perfect-system count buys exactly the GPUs in use beyond the held ones
    its models may use (chat's 2 A100s in periods 0-2, batch's A100, the unpinned H100 in 3-5)."""
    from optfleet.problems.capacity_plan import baselines

    with_held, without = tiny(reservations=HELD), tiny()
    for rule in (baselines.per_period_on_demand, baselines.reserve_percentile, baselines.greedy_packing, baselines.static_peak,
                 baselines.spot_fallback):
        assert evaluate(with_held, rule(with_held)).total_cost <= evaluate(without, rule(without)).total_cost + 1e-9, rule.__name__
    assert evaluate(with_held, baselines.greedy_packing(with_held)).feasible
    plan = baselines.per_period_on_demand(with_held)
    chat, batch = (gpus_in_use(with_held, np.where(np.arange(2)[:, None] == m, plan.gpu_type, -1), plan.instances) for m in (0, 1))
    usable_a100 = np.minimum(chat[0], [2, 2, 2, 0, 0, 0]) + np.minimum(batch[0], 1)
    expected = np.ceil(chat + batch - 1e-9 - [usable_a100, [0, 0, 0, 1, 1, 1]]).clip(0).astype(int)
    assert plan.on_demand_gpus.tolist() == expected.tolist()
    assert evaluate(with_held, baselines.per_period_on_demand(with_held)).cost_by_option["on_demand"] < \
        evaluate(without, baselines.per_period_on_demand(without)).cost_by_option["on_demand"]


@pytest.mark.parametrize(("reservation", "field", "says"), [
    ({"gpu_type": "A100", "gpus": 1, "start_period": 6, "term_periods": 2}, "reservations[0].start_period", "outside the horizon"),
    ({"gpu_type": "A100", "gpus": -1, "term_periods": 2}, "reservations.0.gpus", "-1"),
    ({"gpu_type": "B200", "gpus": 1, "term_periods": 2}, "reservations[0].gpu_type", "not a GPU type"),
    ({"gpu_type": "A100", "gpus": 1, "term_periods": 2, "model": "llama"}, "reservations[0].model", "not a model"),
    ({"gpu_type": "A100", "gpus": 1, "end_period": 3, "term_periods": 3}, "reservations[0]", "exactly one of end_period"),
    ({"gpu_type": "A100", "gpus": 1, "start_period": 3, "end_period": 2}, "reservations[0].end_period", "not after start_period"),
], ids=["outside-horizon", "negative", "unknown-type", "unknown-model", "end-and-term", "end-before-start"])
def test_bad_reservations_exit_2_naming_the_field(tmp_path, capsys, reservation, field, says):
    document = yaml.safe_load(TINY.read_text())
    document["reservations"] = [reservation]
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(document))
    assert main(["solve", str(path), "--out", str(tmp_path / "out")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {field} = ") and says in err[0], err
    assert not (tmp_path / "out").exists()


def test_overlapping_reservations_of_a_model_exit_2_and_adjoining_or_unpinned_ones_add_up(tmp_path, capsys):
    """chat's A100s in periods 0-2 and 2-4 share period 2: refused, naming the later entry.  Periods 0-2 and 3-5
    adjoin; unpinned ones overlap freely; the same periods pinned to another model or type are not an overlap."""
    first = {"gpu_type": "A100", "gpus": 2, "start_period": 0, "end_period": 3, "model": "chat"}
    document = yaml.safe_load(TINY.read_text())
    document["reservations"] = [first, {"gpu_type": "H100", "gpus": 1, "end_period": 6},
                                {"gpu_type": "A100", "gpus": 1, "start_period": 2, "term_periods": 3, "model": "chat"}]
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(document))
    assert main(["validate", str(path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: reservations[2] = 'chat on A100, periods 2-4'"), err
    assert "overlaps reservations[0] (periods 0-2)" in err[0] and "in periods 2-2" in err[0], err
    fine = [first, {**first, "start_period": 3, "end_period": 6}, {**first, "model": "batch"}, {**first, "gpu_type": "H100"},
            {"gpu_type": "A100", "gpus": 1, "end_period": 6}, {"gpu_type": "A100", "gpus": 2, "end_period": 2}]
    problem = tiny(reservations=fine)
    assert problem.held.pinned[0, 0].tolist() == [2] * 6 and problem.held.pool[0].tolist() == [3, 3, 1, 1, 1, 1]


# --- spot availability traces (the format of skypilot-org/spot-traces) -------------------------------------------

AVAILABLE = [3] * 8 + [3, 2, 3, 3, 3, 3, 3, 3] + [0] * 8 + [1] * 8 + [3] * 8 + [2] * 8 + [1] * 8
"""Half-hour ticks, 8 per 4-h period of tiny, 7 periods: the fewest available per period is 3 2 0 1 3 2 1."""


def _with_spot_trace(tmp_path, data, gap_seconds=1800, **trace):
    """tiny with the H100's spot availability read from a trace file written in the spot-traces format."""
    document = yaml.safe_load(TINY.read_text())
    spot = document["gpus"][1]["spot"]
    del spot["max_gpus"]
    spot["availability_trace"] = {"file": "trace.json", "values": "available_instances", **trace}
    (tmp_path / "trace.json").write_text(json.dumps({"metadata": {"gap_seconds": gap_seconds}, "data": data}))
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_a_spot_trace_gives_the_fewest_instances_available_in_each_period(tmp_path):
    problem = prepare(load_instance(_with_spot_trace(tmp_path, AVAILABLE)))
    assert problem.offers[1].spot_cap.tolist() == [3, 2, 0, 1, 3, 2]
    later = prepare(load_instance(_with_spot_trace(tmp_path, AVAILABLE, start_hour=4, gpus_per_instance=2)))
    assert later.offers[1].spot_cap.tolist() == [4, 0, 2, 6, 4, 2]


def test_a_tick_straddling_two_periods_counts_in_both(tmp_path):
    """Ticks of 10,000 s against 14,400-s periods: period 0 is in ticks 0-1 (min(5, 4)), period 1 in ticks 1-2
    (min(4, 3)), period 2 ([28,800, 43,200) s) in ticks 2-4 (min(3, 2, 1))."""
    problem = prepare(load_instance(_with_spot_trace(tmp_path, [5, 4, 3, 2, 1, 6, 6, 6, 6, 6], gap_seconds=10_000)))
    assert problem.offers[1].spot_cap.tolist() == [4, 3, 1, 1, 6, 6]


def test_preempted_flags_are_read_as_one_instance_available_when_0(tmp_path):
    flags = [0] * 8 + [0, 0, 1, 0, 0, 0, 0, 0] + [1] * 8 + [0] * 24
    problem = prepare(load_instance(_with_spot_trace(tmp_path, flags, values="preempted", gpus_per_instance=3)))
    assert problem.offers[1].spot_cap.tolist() == [3, 0, 0, 3, 3, 3]


def test_the_milp_keeps_to_the_trace_caps_as_to_the_same_caps_listed(tmp_path):
    """The trace's caps are the spot caps of the model and the evaluator: the plan equals the one with max_gpus
    listed per period."""
    traced = prepare(load_instance(_with_spot_trace(tmp_path, AVAILABLE)))
    schedule, report = solve_milp(traced)
    assert report.status == "optimal" and (schedule.spot_gpus[1] <= [3, 2, 0, 1, 3, 2]).all()
    assert evaluate(traced, schedule).feasible
    assert report.objective == pytest.approx(solve_milp(tiny(gpus__1__spot__max_gpus=[3, 2, 0, 1, 3, 2]))[1].objective, rel=1e-9)


@pytest.mark.parametrize(("data", "trace", "field", "says"), [
    (AVAILABLE[:40], {}, "gpus[1].spot.availability_trace.file", "the horizon needs 24 h"),
    (AVAILABLE, {"start_hour": 5}, "gpus[1].spot.availability_trace.file", "from start_hour 5 the horizon needs 29 h"),
    (AVAILABLE[:3] + [-1] + AVAILABLE[4:], {}, "gpus[1].spot.availability_trace.file:data[3]", "not a whole number"),
    (AVAILABLE[:5] + [1.5] + AVAILABLE[6:], {}, "gpus[1].spot.availability_trace.file:data[5]", "not a whole number"),
    (AVAILABLE, {"values": "preempted"}, "gpus[1].spot.availability_trace.file:data[0]", "not 0 or 1"),
    ([5] * 48, {"gpus_per_instance": 1000}, "gpus[1].spot.availability_trace.gpus_per_instance", "5000 spot GPUs"),
], ids=["short", "late-start", "negative", "fraction", "not-a-flag", "too-many-gpus"])
def test_bad_spot_traces_exit_2_naming_the_field(tmp_path, capsys, data, trace, field, says):
    path = _with_spot_trace(tmp_path, data, **trace)
    assert main(["solve", str(path), "--out", str(tmp_path / "out")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {field} = ") and says in err[0], err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("text", "field", "says"), [
    ('{"metadata": {"gap_seconds": 300}, "data": [1, 2,\n 3', "gpus[1].spot.availability_trace.file", "not a JSON document (line 2"),
    ('{"metadata": {}, "data": [1, 2]}', "gpus[1].spot.availability_trace.file:metadata.gap_seconds", "seconds between ticks"),
    ('{"metadata": {"gap_seconds": 300}, "data": {}}', "gpus[1].spot.availability_trace.file:data", "non-empty list"),
], ids=["not-json", "no-gap", "no-data"])
def test_malformed_spot_trace_files_exit_2_naming_the_part(tmp_path, capsys, text, field, says):
    path = _with_spot_trace(tmp_path, AVAILABLE)
    (tmp_path / "trace.json").write_text(text)
    assert main(["validate", str(path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {field} = ") and says in err[0], err


def test_an_unknown_instance_type_or_zone_of_the_registered_traces_exits_2_listing_them(tmp_path, capsys):
    path = _with_spot_trace(tmp_path, AVAILABLE, file="dataset:spot-traces-aws-2023-08/us-east-2b_a100_8")
    assert main(["validate", str(path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: gpus[1].spot.availability_trace.file = "), err
    assert "has no part 'us-east-2b_a100_8'; its parts: us-east-2b_v100_1, us-west-2a_v100_1, us-west-2c_v100_1" in err[0], err


@pytest.mark.parametrize("both", [True, False], ids=["both", "neither"])
def test_spot_needs_exactly_one_of_a_cap_and_a_trace(tmp_path, both):
    document = yaml.safe_load(_with_spot_trace(tmp_path, AVAILABLE).read_text())
    spot = document["gpus"][1]["spot"]
    if both:
        spot["max_gpus"] = 3
    else:
        del spot["availability_trace"]
    with pytest.raises(InputError, match="exactly one of max_gpus and availability_trace") as caught:
        prepare(load_instance(document))
    assert caught.value.field == "gpus[1].spot"


def test_the_lp_bound_is_below_every_plan_the_evaluator_accepts():
    """On tiny the relaxation splits models across types and buys fractional GPUs: its optimum lies strictly below
    the MILP's $178.80, and below every rule's plan the evaluator accepts; with a time limit too short to solve it,
    there is no bound."""
    from optfleet.problems.capacity_plan import baselines

    problem = tiny()
    bound = lp_bound(problem)
    assert bound is not None and bound < solve_milp(problem)[1].objective - 1.0
    for rule in (baselines.static_peak, baselines.reserve_percentile, baselines.spot_fallback):
        evaluation = evaluate(problem, rule(problem))
        assert not evaluation.feasible or evaluation.total_cost >= bound
    assert lp_bound(problem, time_limit_s=1e-9) is None


def test_the_milp_tells_its_progress_step_by_step():
    """``solve_milp`` names each step as it starts, with the share of the time limit spent (non-decreasing, in
    [0, 1]); through the kind, the labels carry the method's name."""
    calls = []
    solve_milp(tiny(), progress=lambda label, done, total: calls.append((label, done, total)))
    labels = [label for label, _, _ in calls]
    assert labels[:3] == ["LP relaxation", "assignment search", "assignment relaxation's bound"]
    assert set(labels) <= {"LP relaxation", "assignment search", "assignment relaxation's bound", "full MILP"}
    shares = [done for _, done, _ in calls]
    assert all(0 <= a <= b <= 1 for a, b in zip(shares, shares[1:])) and {total for _, _, total in calls} == {1}
    from optfleet.problems.capacity_plan.kind import run
    told = []
    run(tiny(), "milp", lambda label, done, total: told.append(label))
    assert "milp: assignment search" in told


def test_a_bound_above_an_accepted_plan_is_an_internal_error_not_an_optimal_report(monkeypatch):
    """An invalid row would show as a bound above a plan the evaluator accepts: the solve says so instead of
    reporting that plan optimal."""
    import optfleet.problems.capacity_plan.exact as exact
    from optfleet.solvers.report import SolveReport

    monkeypatch.setattr(exact, "assignment_bound", lambda problem, start, by: SolveReport("time_limit", None, 1e9, None, 0.0, "highs"))
    with pytest.raises(RuntimeError, match="lower bound .* above a plan"):
        solve_milp(tiny())
