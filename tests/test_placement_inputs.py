"""Bad input to the placement kind: ``simulate --plan`` files, CSV trace cells, the schema's limits and cross-field
checks, policy entries and ``simulate``'s ``--seed``/``--reps``.  Each is one InputError (exit 2) naming the field
and the value."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

import optfleet
from optfleet.errors import InputError
from optfleet.problems.placement.evaluate import replay

from support import REPO

TINY = REPO / "instances" / "placement" / "tiny.yaml"
TIMING = {"prefill_ms_per_token": 0.5, "step_base_ms": 4.0, "step_ms_per_seq": 1.0, "step_ms_per_kv_block": 0.25}
DOC = {"kind": "placement", "name": "t",
       "servers": [{"count": 2, "max_running_seqs": 8, "kv_capacity_blocks": 64, "prefill_budget_tokens": 1000, "timing": TIMING}],
       "workload": {"shared_prefix": {"num_groups": 1, "num_prompts_per_group": 2, "system_prompt_len": 16, "question_len": 8,
                                      "output_len": 2}, "arrivals": {"process": "poisson", "rate_rps": 1, "requests": 4}},
       "policies": ["round_robin"]}


def refused(doc_or_call, field: str, *parts: str) -> InputError:
    """The InputError of loading ``doc_or_call`` (a document, or a callable); its field is ``field`` and its message
    has every one of ``parts``."""
    with pytest.raises(InputError) as caught:
        doc_or_call() if callable(doc_or_call) else optfleet.load(doc_or_call)
    assert caught.value.field == field, str(caught.value)
    for part in parts:
        assert part in str(caught.value), str(caught.value)
    return caught.value


def changed(change) -> dict:
    doc = copy.deepcopy(DOC)
    change(doc)
    return doc


# --- simulate --plan ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("entry", "shown"), [(0.5, "0.5"), (1.9, "1.9"), (True, "True"), (False, "False"), ("a", "'a'"),
                                              (float("nan"), "nan"), (10**30, str(10**30)), (1e30, "1e+30"), ([0], "[0]"),
                                              (-1, "-1"), (2, "2")])
def test_a_plan_entry_that_is_not_a_server_index_is_refused_naming_plan(tmp_path, entry, shown):
    plan = [entry, *[0] * 3]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    for given in (str(path), {"placement": plan}, plan):
        refused(lambda given=given: optfleet.simulate(DOC, plan=given), "--plan", f"--plan = {shown}: entry 0 is not a server index", "[0, 2)")


@pytest.mark.parametrize("length", [0, 3, 5])
def test_a_plan_of_the_wrong_length_says_both_lengths(length):
    refused(lambda: optfleet.simulate(DOC, plan=[0] * length), "--plan", f"has {length} entries; the instance has 4 requests")


def test_a_plan_mapping_without_placement_is_refused():
    refused(lambda: optfleet.simulate(DOC, plan={"plan": [0] * 4}), "--plan", "needs the key placement")


def test_a_float_or_short_placement_array_is_refused_by_the_evaluator():
    problem = optfleet.load(DOC).problem
    refused(lambda: replay(problem, np.zeros(4)), "placement", "entry 0 is not a server index")
    refused(lambda: replay(problem, np.zeros(3, dtype=np.int64)), "placement", "has 3 entries; the instance has 4 requests")
    refused(lambda: replay(problem, np.array([0, 1, 2, 0])), "placement", "placement = 2: entry 2 is not a server index")
    assert replay(problem, np.array([0, 1, 1, 0])).server.tolist() == [0, 1, 1, 0]


def test_the_cli_refuses_a_fractional_plan_with_exit_2_and_writes_nothing(tmp_path, capsys):
    from optfleet.cli import main

    (tmp_path / "t.yaml").write_text(json.dumps(DOC))
    (tmp_path / "plan.json").write_text("[0.5, 0, 0, 0]")
    assert main(["simulate", str(tmp_path / "t.yaml"), "--plan", str(tmp_path / "plan.json"), "--quiet", "--out", str(tmp_path / "out")]) == 2
    assert "--plan = 0.5" in capsys.readouterr().err and not (tmp_path / "out").exists()


# --- CSV traces ----------------------------------------------------------------------------------------------------

def trace(tmp_path, text: str) -> dict:
    (tmp_path / "t.csv").write_text(text)
    return changed(lambda d: d.update(workload={"trace": {"file": str(tmp_path / "t.csv")}}))


HEADER = "arrival_s,prompt_tokens,output_tokens,group,shared_prefix_tokens,session\n"


@pytest.mark.parametrize(("row", "column", "value", "problem"), [
    ("abc,10,5,0,4,0", "arrival_s", "'abc'", "not a number"),
    ("1,ten,5,0,4,0", "prompt_tokens", "'ten'", "not a number"),
    ("1,10,5,alpha,4,0", "group", "'alpha'", "not a number"),
    ("1,10.7,5,0,4,0", "prompt_tokens", "'10.7'", "must be a whole number"),
    ("1,10,5.5,0,4,0", "output_tokens", "'5.5'", "must be a whole number"),
    ("1,10,5,0,4.5,0", "shared_prefix_tokens", "'4.5'", "must be a whole number"),
    ("1,10,5,0.5,4,0", "group", "'0.5'", "must be a whole number"),
    ("1,10,5,0,4,1.5", "session", "'1.5'", "must be a whole number"),
    ("1,10,0,0,4,0", "output_tokens", "'0'", "must be >= 1; every request needs at least one prompt and one output token"),
    ("1,10,,0,4,0", "output_tokens", "''", "an empty cell"),
    ("nan,10,5,0,4,0", "arrival_s", "'nan'", "must be a finite number"),
    ("1,inf,5,0,4,0", "prompt_tokens", "'inf'", "must be a finite number"),
    ("1,10,5,0,40,0", "shared_prefix_tokens", "'40'", "exceeds its prompt's 10 tokens"),
])
def test_a_bad_trace_cell_names_its_column_value_and_row(tmp_path, row, column, value, problem):
    doc = trace(tmp_path, HEADER + "0,10,5,0,4,0\n" + row + "\n")
    refused(doc, f"workload.trace.file:{column}", f"= {value}: {problem}", "(row 2 of ")


@pytest.mark.parametrize(("rows", "column", "message"), [
    ("0,10,5,0,4,0\n1,12,5,0,8,1\n", "shared_prefix_tokens", "= 8: group 0 has a 4-token shared prefix in row 1 and this in row 2 of "),
    ("0,10,5,0,4,0\n1,12,5,,,0\n", "group", "= 'none': session 0 is in group 0 in row 1 and in none in row 2 of "),
    ("1,10,5,-3,,2\n0,12,5,1,4,2\n", "group", "= 'group 1': session 2 is in none in row 1 and in group 1 in row 2 of "),
])
def test_a_trace_whose_group_or_session_disagrees_with_itself_is_refused(tmp_path, rows, column, message):
    """The caches name a block by its group's system prompt or its conversation: one group with two system-prompt
    lengths, or one conversation in two groups, is refused (rows counted in the file, before sorting by arrival)."""
    refused(trace(tmp_path, HEADER + rows), f"workload.trace.file:{column}", message)


def test_a_good_trace_still_loads_with_empty_group_and_session_cells(tmp_path):
    q = optfleet.load(trace(tmp_path, HEADER + "1,10,5,0,4,3\n0,12,6,,,\n")).problem.requests
    assert q.prompt_tokens.tolist() == [12, 10] and q.group.tolist() == [-1, 0] and q.session.tolist() == [4, 3]


# --- schema limits -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("change", "field", "part"), [
    (lambda d: d["servers"][0]["timing"].update(prefill_ms_per_token=1e8), "servers.0.timing.prefill_ms_per_token", "limit of 100 ms per token"),
    (lambda d: d["servers"][0]["timing"].update(step_base_ms=1e6), "servers.0.timing.step_base_ms", "limit of 100,000 ms"),
    (lambda d: d["servers"][0]["timing"].update(step_ms_per_seq=1e6), "servers.0.timing.step_ms_per_seq", "limit of 100,000 ms"),
    (lambda d: d["servers"][0]["timing"].update(step_ms_per_kv_block=1e6), "servers.0.timing.step_ms_per_kv_block", "limit of 100,000 ms"),
    (lambda d: d["servers"][0]["timing"].update(step_base_ms=0), "servers.0.timing.step_base_ms", "greater than 0"),
    (lambda d: d["servers"][0]["timing"].pop("step_base_ms"), "servers.0.timing.step_base_ms", "required"),
    (lambda d: d["workload"]["shared_prefix"].update(question_len_sd=1e308), "workload.shared_prefix.question_len_sd", "limit of 100,000,000 tokens"),
    (lambda d: d["workload"]["shared_prefix"].update(output_len_sd=1e9), "workload.shared_prefix.output_len_sd", "limit of 100,000,000 tokens"),
    (lambda d: d["workload"]["shared_prefix"].update(question_len=10**9), "workload.shared_prefix.question_len", "limit of 100,000,000 tokens"),
    (lambda d: d["workload"]["shared_prefix"].update(num_groups=10**5, num_prompts_per_group=10**5),
     "workload.shared_prefix.num_prompts_per_group", "10,000,000,000 users: above the limit of 2,000,000"),
    (lambda d: d["workload"].update(arrivals={"process": "stepped", "steps": [{"rate_rps": 1e9, "duration_s": 1e9}]}),
     "workload.arrivals.steps", "above the limit of 2,000,000 requests"),
])
def test_a_value_beyond_its_limit_is_refused(change, field, part):
    refused(changed(change), field, part)


def test_a_minimal_timing_without_step_base_ms_is_refused_not_crashed():
    refused(changed(lambda d: d["servers"][0].update(timing={"prefill_ms_per_token": 0.1})), "servers.0.timing.step_base_ms", "required")


# --- silently accepted inputs ----------------------------------------------------------------------------------------

STEPS = [{"rate_rps": 1, "duration_s": 2}]


@pytest.mark.parametrize(("change", "field", "part"), [
    (lambda d: d["workload"]["arrivals"].update(steps=STEPS), "workload.arrivals.steps", "poisson arrivals have no steps"),
    (lambda d: d["workload"].update(arrivals={"process": "stepped", "rate_rps": 3, "steps": STEPS}), "workload.arrivals.rate_rps", "leave it out"),
    (lambda d: d["workload"].update(arrivals={"process": "stepped", "requests": 3, "steps": STEPS}), "workload.arrivals.requests", "leave it out"),
    (lambda d: d.update(solve={"lookahead_requests": 4, "lookahead_commit": 5}), "solve.lookahead_commit", "exceeds lookahead_requests = 4"),
    (lambda d: d.update(solve={"lookahead_requests": 4}), "solve.lookahead_commit", "its default is 8"),
    (lambda d: d["workload"]["shared_prefix"].update(max_prompt_tokens=16), "workload.shared_prefix.max_prompt_tokens",
     "must exceed system_prompt_len (16)"),
    (lambda d: d.update(policies=[{"name": "load_prefix", "weights": {}}]), "policies.0.weights", "at least one positive entry"),
    (lambda d: d.update(policies=[{"name": "load_prefix", "weights": {"prefix": 0, "queue": 0}}]), "policies.0.weights", "at least one positive entry"),
    (lambda d: d.update(policies=[{"name": "load_prefix", "weights": {"prefix": 1e308}}]), "policies.0.weights.prefix", "limit of 1,000,000"),
])
def test_an_input_that_would_be_ignored_or_misread_is_refused(change, field, part):
    refused(changed(change), field, part)


def test_the_commit_and_prompt_limits_accept_their_edges():
    doc = changed(lambda d: d.update(solve={"lookahead_requests": 4, "lookahead_commit": 4}))
    doc["workload"]["shared_prefix"]["max_prompt_tokens"] = 17
    doc["workload"]["arrivals"] = {"process": "stepped", "steps": STEPS}
    assert optfleet.load(doc).problem.solve.lookahead_commit == 4


# --- policy entries ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("entry", "message"), [
    ({"name": "load_prefix", "weights": {"prefix": -1}}, "policies.0.weights.prefix = -1: "),
    ({"name": "load_prefix", "weights": {"prefix": float("nan")}}, "policies.0.weights.prefix = nan: "),
    ({"name": "predicted_latency", "ttft_weight": 2}, "policies.0.ttft_weight = 2: "),
    ({"name": "predicted_latency", "predictor": "magic"}, "policies.0.predictor = 'magic': "),
    ({"label": "x"}, "policies.0.name = None: required field is missing"),
    (5, "policies.0 = 5: a policy is a registered name or a mapping"),
])
def test_a_bad_policy_entry_names_its_own_field(entry, message):
    with pytest.raises(InputError) as caught:
        optfleet.load(changed(lambda d: d.update(policies=[entry])))
    assert str(caught.value).startswith(message), str(caught.value)
    assert "valid string" not in str(caught.value)


# --- simulate --seed and --reps -------------------------------------------------------------------------------------

def test_a_negative_seed_names_the_option():
    refused(lambda: optfleet.simulate(TINY, method="round_robin", seed=-1), "--seed", "--seed = -1")


def test_a_replication_whose_draw_fails_is_named_before_any_run():
    """Seed 2 draws a request of 7 blocks, above the 6 the server holds (seeds 0 and 1 do not): its replication is
    named, and no replication ran (the progress display saw none)."""
    doc = changed(lambda d: d["servers"][0].update(kv_capacity_blocks=6))
    doc["workload"]["shared_prefix"].update(question_len=24, question_len_sd=8, output_len=4)
    assert [int(optfleet.load(doc, workload__seed=s).problem.total_blocks.max()) for s in (0, 1)] == [6, 5]
    calls = []
    with pytest.raises(InputError) as caught:
        optfleet.simulate(doc, method="round_robin", reps=4, seed=0, progress=lambda *a: calls.append(a))
    assert "(replication 3, seed 2)" in str(caught.value) and caught.value.field == "servers[0].kv_capacity_blocks"
    assert calls == []


def test_too_many_replications_are_refused_before_any_run():
    refused(lambda: optfleet.simulate(TINY, method="round_robin", reps=10**9), "--reps", "--reps = 1000000000", "[1, 1000]")


# --- the horizon ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rate", [1e-300, 1e-7])
def test_arrivals_beyond_the_horizon_are_refused_naming_the_rate(rate):
    """A rate so low that the last arrival falls after 10^6 s (times are kept in ms in double precision; at 1e-7 the
    hindsight MILP reported a 4-request trace infeasible, at 1e-300 HiGHS refused the arrays)."""
    refused(changed(lambda d: d["workload"]["arrivals"].update(rate_rps=rate)), "workload.arrivals.rate_rps", "above the limit of 1e+06 s")


def test_a_trace_beyond_the_horizon_is_refused_with_advice(tmp_path):
    refused(trace(tmp_path, HEADER + "0,10,5,0,4,0\n2000000,10,5,0,4,0\n"), "workload.trace.file:arrival_s", "shift the arrival times")
