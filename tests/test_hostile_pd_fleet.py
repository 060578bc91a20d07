"""Hostile inputs to ``kind: pd_fleet`` (solve, gap, validate, simulate and its ``--plan`` file): the contract of
tests/test_hostile_inputs.py, extended to this kind.

Bad input ends with exit 2 and ONE stderr line naming the field (and the value as written), no traceback, nothing
written to ``--out``; valid but extreme input ends with exit 0 or 1 and finite numbers.  Every case is data
(:class:`~test_hostile_inputs.Case`) mutating the shipped chat instance (instances/pd_fleet/chat.yaml, the fastest);
the runner and the checks are the first corpus's.  Each case here failed before the fix it came with (review of the
pd_fleet kind, Nov 28).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import REPO
import test_hostile_inputs as first
from test_hostile_inputs import DELETE, Case, assert_outcome, materialize, run_in_process, run_subprocess

from optfleet.instance import load_instance
from optfleet.problems.pd_fleet.evaluator import evaluate
from optfleet.problems.pd_fleet.plan import plan_from_dict
from optfleet.problems.pd_fleet.problem import prepare

pytestmark = pytest.mark.unit

first.BASE["pd_fleet"] = yaml.safe_load((REPO / "instances" / "pd_fleet" / "chat.yaml").read_text())

AGG = "agg H100-SXM B2048"
PREFILL, DECODE = "P H100-SXM B2048", "D H100-SXM b64"
SIM = ("--plan", "{dir}/plan.json", "--requests", "2000", "--reps", "1")


def plan_case(label: str, pools: list[Any], field: str, value: str | None = None, says: str | None = None,
              sub: bool = False) -> Case:
    """``optfleet simulate --plan plan.json`` of the chat instance with ``pools`` as the plan's pools."""
    return Case(label, "pd_fleet", {}, command="simulate", argv=SIM, files=(("plan.json", json.dumps({"pools": pools})),),
                field=field, value=value, says=says, sub=sub)


CASES = [
    # --- unknown GPU of a role: named as the role's list entry, not as the fleet kind's hardware.gpu -------------
    Case("pd_fleet: unknown prefill GPU", "pd_fleet", {"prefill.gpus": ["H999"]}, field="prefill.gpus[0]", value="H999"),
    Case("pd_fleet: unknown decode GPU", "pd_fleet", {"decode.gpus": ["L40S", "H999"]}, field="decode.gpus[1]", value="H999"),
    Case("pd_fleet: unknown aggregated GPU", "pd_fleet", {"aggregated.gpus": ["H999"]}, field="aggregated.gpus[0]",
         value="H999", command="validate"),
    # --- a candidate listed twice: named as the list, with the repeated candidate ------------------------------------
    Case("pd_fleet: decode GPU listed twice", "pd_fleet", {"decode.gpus": ["L40S", "L40S"]}, field="decode.gpus",
         says="twice"),
    Case("pd_fleet: decode max_batch listed twice", "pd_fleet", {"decode.max_batch": [64, 64]}, field="decode.max_batch",
         says="twice"),
    Case("pd_fleet: prefill token budget listed twice", "pd_fleet", {"prefill.token_budget": [2048, 2048]},
         field="prefill.token_budget", says="twice"),
    # --- overrides of price and power that overflow the plan's sums ---------------------------------------------------
    Case("pd_fleet: power of 1e308 W per GPU under a power cap", "pd_fleet",
         {"gpus": [{"gpu": "H100-SXM", "power_w": 1e308}, {"gpu": "L40S", "power_w": 1e308}],
          "constraints": [{"kind": "power", "max_power_w": 1e9}]}, field="gpus.0.power_w", value="1e+308"),
    Case("pd_fleet: power of 1e308 W per GPU", "pd_fleet", {"gpus": [{"gpu": "H100-SXM", "power_w": 1e308}]},
         field="gpus.0.power_w", value="1e+308"),
    Case("pd_fleet: price of 1e308 $/h per GPU", "pd_fleet",
         {"gpus": [{"gpu": "H100-SXM", "cost_per_gpu_hour": 1e308}, {"gpu": "L40S", "cost_per_gpu_hour": 1e308}]},
         field="gpus.0.cost_per_gpu_hour", value="1e+308", command="gap"),
    # --- rules over several blocks: named by the block to add or change (the field, then " = "), not by
    # "instance = {the whole document}", whose repr contained every block's name -----------------------------------
    Case("pd_fleet: no model and no config_json", "pd_fleet", {"model": DELETE}, field="model = None", says="config_json"),
    Case("pd_fleet: prefill without decode", "pd_fleet", {"decode": DELETE}, field="decode = None", says="both"),
    Case("pd_fleet: decode without prefill", "pd_fleet", {"prefill": DELETE}, field="prefill = None", says="both", command="validate"),
    Case("pd_fleet: aggregated disabled and no disaggregated roles", "pd_fleet",
         {"aggregated.enabled": False, "prefill": DELETE, "decode": DELETE}, field="aggregated.enabled = False", says="no option left"),
    # --- infeasible constraints explained: why a fixed count is out of reach, and two culprits in the plural ---------
    Case("pd_fleet: a fixed count no instance size reaches", "pd_fleet",
         {"aggregated.tp": [2], "prefill.tp": [2], "decode.tp": [2], "constraints": [{"kind": "fixed", "gpu": "L40S", "gpus": 3}]},
         exit=1, says="every L40S option holds a multiple of 2 GPUs, and 3 is not one"),
    Case("pd_fleet: two fixed counts of one GPU type", "pd_fleet",
         {"constraints": [{"kind": "fixed", "gpu": "L40S", "gpus": 2}, {"kind": "fixed", "gpu": "L40S", "gpus": 3}]},
         exit=1, says="without any one of them"),
    # --- a window far above the workload: the budget it splits into too many chunks is named with the window --------
    Case("pd_fleet: a window of 10^9 tokens", "pd_fleet", {"pools.windows_tokens": [2500, 10**9]},
         field="aggregated.max_num_batched_tokens[0]", says="pools.windows_tokens: 1,000,000,000 tokens"),
    # --- a link pair naming a GPU type its role does not offer (a typo left the default bandwidth, silently) --------
    Case("pd_fleet: link pair with a prefill GPU no prefill option uses", "pd_fleet",
         {"links.pairs": [{"prefill_gpu": "A100-80GB", "decode_gpu": "L40S", "gb_per_s": 10}]},
         field="links.pairs[0].prefill_gpu", value="A100-80GB"),
    Case("pd_fleet: link pair with a decode GPU no decode option uses", "pd_fleet",
         {"links.pairs": [{"prefill_gpu": "L40S", "decode_gpu": "A100-80GB", "gb_per_s": 10}]},
         field="links.pairs[0].decode_gpu", value="A100-80GB", command="validate"),
    # --- simulate options: the run's size counts every pool simulated (2 x 10^8 requests per pool ran for hours) ---
    Case("pd_fleet simulate: 1.5 x 10^8 requests in each of two pools", "pd_fleet",
         lambda doc: yaml.safe_load((REPO / "instances" / "pd_fleet" / "rag_long_prompt.yaml").read_text()),
         command="simulate", argv=("--requests", "10000000", "--reps", "15"), field="--requests", value="10000000",
         says="2 pools", sub=True),
    # a replication above the pool simulator's limit was refused only after the plan's solve, as "requests" (and
    # 2 x 10^7 arrivals, which the fleet's limit allows, ended in a MemoryError under 4 GB)
    Case("pd_fleet simulate: 2 x 10^7 requests per replication", "pd_fleet", {}, command="simulate",
         argv=("--plan", "{dir}/plan.json", "--requests", "20000000", "--reps", "1"),
         files=(("plan.json", json.dumps({"pools": [{"prefill": PREFILL, "prefill_instances": 2, "decode": DECODE,
                                                     "decode_instances": 2}]})),),
         field="--requests = 20000000", says="limit", sub=True),
    # --- simulate --plan --------------------------------------------------------------------------------------------
    plan_case("pd_fleet plan: a trillion aggregated instances", [{"aggregated": AGG, "instances": 10**12}],
              "plan.pools[0].instances", value="1000000000000", says="limit", sub=True),
    plan_case("pd_fleet plan: a billion decode instances", [{"prefill": PREFILL, "prefill_instances": 2, "decode": DECODE,
                                                            "decode_instances": 10**9}],
              "plan.pools[0].decode_instances", value="1000000000", says="limit", sub=True),
    plan_case("pd_fleet plan: a disaggregated pool without its decode option",
              [{"prefill": PREFILL, "prefill_instances": 2, "decode_instances": 2}], "plan.pools[0].decode", says="missing"),
    plan_case("pd_fleet plan: a prefill option as an aggregated one", [{"aggregated": PREFILL, "instances": 2}],
              "plan.pools[0].aggregated", value=PREFILL, says="not an aggregated option"),
    # a pool with traffic left empty was simulated and exited 0 with an infeasible verdict; the fleet kind refuses it
    plan_case("pd_fleet plan: a busy pool without instances", [None], "plan.pools[0]", says="no instances"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_hostile_pd_fleet(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    instance = materialize(case, tmp_path)
    out_dir = tmp_path / "out"
    argv = [case.command, str(instance), *[a.replace("{dir}", str(tmp_path)) for a in case.argv], "--json"]
    if case.command in ("solve", "gap", "simulate"):
        argv += ["--out", str(out_dir), "--quiet"]
    outcome = run_subprocess(argv, tmp_path) if case.sub else run_in_process(argv, capsys)
    assert_outcome(case, outcome, out_dir)


def _solve_json(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> dict[str, Any]:
    outcome = run_in_process(["solve", str(REPO / "instances" / "pd_fleet" / name), "--json", "--quiet"], capsys)
    assert outcome.code == 0, outcome.summary()
    return json.loads(outcome.stdout)


def test_an_aggregated_plan_names_the_batching_model_as_its_approximation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """chat's optimum is all aggregated: its figures come from the fleet kind's batching model, not the disaggregated
    pool model whose approximations (Kimura's tails, the link) every report listed."""
    said = " ".join(_solve_json(tmp_path, capsys, "chat.yaml")["results"][0]["evaluation"]["approximations"])
    assert "batching model" in said and "optfleet simulate" in said, said
    assert "Kimura" not in said, said


def test_a_mixed_plan_names_both_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """rag_long_prompt's optimum has an aggregated and a disaggregated pool: both models' approximations are said."""
    said = " ".join(_solve_json(tmp_path, capsys, "rag_long_prompt.yaml")["results"][0]["evaluation"]["approximations"])
    assert "batching model" in said and "Kimura" in said, said


@pytest.mark.parametrize("decode_instances, queue", [(1, "(a queue without a steady state: decode)"),
                                                     (3, "decode admission, mean batch 108.3 >= 8 batch slots")])
def test_an_unbounded_ttft_is_said_in_words(decode_instances: int, queue: str) -> None:
    """A plan whose decode admission has no steady state (the Dynamo rule's plan of a small max_batch) printed
    "P99 TTFT inf ms > 500 ms"; it is unbounded, and the queue is named."""
    doc = copy.deepcopy(first.BASE["pd_fleet"])
    doc["decode"]["max_batch"] = [8]
    problem = prepare(load_instance(doc))
    plan = plan_from_dict(problem, {"pools": [{"prefill": PREFILL, "prefill_instances": 2, "decode": "D L40S b8",
                                               "decode_instances": decode_instances}]})
    said = "; ".join(evaluate(problem, plan).violations)
    assert "inf ms" not in said and "P99 TTFT unbounded > 500 ms" in said and queue in said, said


def test_the_headline_counts_gpus_with_separators(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """rho_max 1e-9 needs some 2.6e8 GPUs: the headline wrote "262849635 H100-SXM" (the table's counts have commas)."""
    doc = copy.deepcopy(first.BASE["pd_fleet"])
    doc["slo"]["rho_max"] = 1e-9
    path = tmp_path / "i.yaml"
    path.write_text(yaml.safe_dump(doc))
    outcome = run_in_process(["solve", str(path), "--quiet"], capsys)
    assert outcome.code == 0 and "262,849,635 H100-SXM" in outcome.stdout, outcome.stdout


def test_an_unbounded_analytic_figure_is_not_printed_inf(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """simulate's comparison printed "inf" (left-aligned, breaking the column) for a P99 TTFT without a steady state."""
    doc = copy.deepcopy(first.BASE["pd_fleet"])
    doc["decode"]["max_batch"] = [8]
    (tmp_path / "i.yaml").write_text(yaml.safe_dump(doc))
    (tmp_path / "plan.json").write_text(json.dumps({"pools": [{"prefill": PREFILL, "prefill_instances": 2, "decode": "D L40S b8",
                                                               "decode_instances": 3}]}))
    outcome = run_in_process(["simulate", str(tmp_path / "i.yaml"), "--plan", str(tmp_path / "plan.json"), "--requests", "2000",
                              "--reps", "1", "--quiet"], capsys)
    assert outcome.code == 0, outcome.summary()
    row = next(line for line in outcome.stdout.splitlines() if "P99 TTFT ms" in line)
    assert "inf" not in row and row.split()[5] == "-", row
    assert "analytic -: unbounded" in outcome.stdout, outcome.stdout
    assert "x 1 replication (seed" in outcome.stdout and "1 replications" not in outcome.stdout  # said "1 replications"
