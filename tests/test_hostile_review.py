"""Hostile inputs to the prefix_cache kind's traces and to ``optfleet explain``'s options (review of the four new
features): each case ends with exit 2 and ONE stderr line naming the field (and line) and the value, no traceback,
nothing on stdout and nothing written to ``--out``.  The runner and the checks are tests/test_hostile_inputs.py's."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from support import REPO
from test_hostile_inputs import _write, assert_bad_input, run_in_process

pytestmark = pytest.mark.unit

PREFIX_CACHE = yaml.safe_load((REPO / "instances" / "prefix_cache" / "mooncake_sample.yaml").read_text())
TOY_FLEET = REPO / "instances" / "fleet" / "toy.yaml"


@dataclass(frozen=True)
class Case:
    """A prefix_cache instance reading ``trace`` (the trace file's content) in ``fmt`` with the instance ``changes``,
    or, with ``explain`` set, ``optfleet explain`` on the toy fleet with those options; ``field``/``value``/``says``
    as in tests/test_hostile_inputs.py."""

    label: str
    field: str
    value: str | None = None
    says: str | None = None
    trace: str | bytes = ""
    fmt: str = "mooncake"
    changes: tuple[tuple[str, object], ...] = ()
    explain: tuple[str, ...] = ()


def line(**changes: object) -> str:
    row = {"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [1, 2]}
    row.update(changes)
    return json.dumps(row) + "\n"


GOOD = line()
GENERIC = (("trace.block_tokens", 16),)


def bailian(chat: object, parent: object) -> str:
    return json.dumps({"chat_id": chat, "parent_chat_id": parent, "timestamp": 0, "input_length": 16, "output_length": 1,
                       "hash_ids": [1]}) + "\n"


CASES = [
    Case("trace: a line that is not UTF-8", "trace.file", says="line 2 is not UTF-8", trace=GOOD.encode() + b'{"timestamp": 1\xff}\n'),
    Case("trace: a line nested beyond recursion", "trace.file", says="line 1 nests too deeply", trace="[" * 100_000 + "]" * 100_000),
    Case("trace: an output length beyond int64", "trace.output_length", "1000000000000000000000000000000",
         says="line 1", trace=line(output_length=10**30)),
    Case("trace: an integer timestamp beyond float", "trace.timestamp", says="line 2", trace=GOOD + line(timestamp=10**400)),
    Case("trace: a float timestamp of 1e308", "trace.timestamp", "1e+308", says="at most", trace=GOOD + line(timestamp=1e308)),
    Case("trace: every prompt empty", "trace.file", says="no blocks", trace=line(input_length=0, hash_ids=[])),
    Case("trace: a Bailian chat_id that is a list", "trace.chat_id", "[1]", says="line 1", trace=bailian([1], -1), fmt="bailian"),
    Case("trace: a Bailian parent_chat_id that is an object", "trace.parent_chat_id", "{}", says="line 2",
         trace=bailian(1, -1) + bailian(2, {}), fmt="bailian"),
    Case("trace: a generic block list of the wrong length names block_hashes", "trace.block_hashes", "1", says="input_tokens 1000",
         trace='{"arrival_s": 0, "input_tokens": 1000, "output_tokens": 1, "block_hashes": [1]}\n', fmt="generic", changes=GENERIC),
    Case("trace: a generic negative input names input_tokens", "trace.input_tokens", "-5",
         trace='{"arrival_s": 0, "input_tokens": -5, "output_tokens": 1, "block_hashes": []}\n', fmt="generic", changes=GENERIC),
    Case("capacity_blocks beyond int64", "capacity_blocks", "1000000000000000000000000000000", says="above the limit",
         trace=GOOD, changes=(("capacity_blocks", [10**30]),)),
    Case("explain: a reversed range is empty, not 'not numbers'", "--curve", "rho_max=0.9:0.5:3", says="empty range",
         explain=("--curve", "rho_max=0.9:0.5:3")),
    Case("explain: N = 0 is an empty range", "--curve", "rho_max=0.5:0.9:0", says="empty range", explain=("--curve", "rho_max=0.5:0.9:0")),
    Case("explain: an infinite STOP", "--curve", "rho_max=0.1:inf:3", says="finite", explain=("--curve", "rho_max=0.1:inf:3")),
    Case("explain: a NaN START", "--curve", "rho_max=nan:1:3", says="finite", explain=("--curve", "rho_max=nan:1:3")),
    Case("explain: a million curve points (a million exact solves)", "--curve", "1000000", says="limit",
         explain=("--curve", "rho_max=0.5:0.9:1000000")),
    Case("explain: a listed curve of 1,000 values", "--curve", says="limit",
         explain=("--curve", "rho_max=" + ",".join(["0.5"] * 1000))),
    Case("explain: a rate growth that overflows the load (1e308)", "--curve", "1e+308", says="outside (0, 1e+06]",
         explain=("--curve", "rate_growth=1e308,2")),
]


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_hostile_review(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    if case.explain:
        argv = ["explain", str(TOY_FLEET), *case.explain, "--json", "--no-alternatives", "--quiet"]
    else:
        doc = {**PREFIX_CACHE, "trace": {"file": "t.jsonl", "format": case.fmt}}
        for path, value in case.changes:
            head, _, key = path.rpartition(".")
            (doc[head] if head else doc)[key] = value
        _write(tmp_path / "t.jsonl", case.trace)
        _write(tmp_path / "instance.yaml", yaml.safe_dump(doc, sort_keys=False))
        argv = ["solve", str(tmp_path / "instance.yaml"), "--json", "--out", str(out), "--quiet"]
    assert_bad_input(case, run_in_process(argv, capsys), out)


CAPACITY_PLAN = yaml.safe_load((REPO / "instances" / "capacity_plan" / "tiny.yaml").read_text())


def test_capacity_plan_unknown_gpu_names_the_gpu_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown catalog GPU is the GPU type's ``gpus[0].gpu``, not a model's ``service.hardware.gpu`` (which the
    user never wrote: the kind sets it per type)."""
    doc = {**CAPACITY_PLAN, "gpus": [{**CAPACITY_PLAN["gpus"][0], "gpu": "FOO"}, CAPACITY_PLAN["gpus"][1]]}
    _write(tmp_path / "instance.yaml", yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "out"
    case = Case("capacity_plan: unknown GPU", "gpus.0.gpu", "FOO", says="unknown GPU")
    assert_bad_input(case, run_in_process(["solve", str(tmp_path / "instance.yaml"), "--json", "--out", str(out), "--quiet"], capsys), out)


FORMS = {"decoding_large_small_bs_threshold": 64, "prefill": [20.0, 0.1, 1e-5], "decoding_smallbs": [15.0, 5e-4, 0.05],
         "decoding_largebs": [10.0, 4e-4, 0.15]}


@pytest.mark.parametrize(("label", "by_tp", "field", "says"), [
    ("an integer coefficient beyond float", {"1": {**FORMS, "prefill": [10**400, 0, 0]}}, "hardware.performance.file", "prefill must be"),
    ("an integer threshold beyond float", {"1": {**FORMS, "decoding_large_small_bs_threshold": 10**400}}, "hardware.performance.file",
     "threshold"),
    ("a coefficient list of 100,000 numbers", {"1": {**FORMS, "prefill": list(range(100_000))}}, "hardware.performance.file",
     "prefill must be"),
    ("5,000 TP degrees, none the one asked", {str(d): FORMS for d in range(2, 5000)}, "hardware.tp", "not at TP 1"),
], ids=lambda v: v if isinstance(v, str) and " " in v else "")
def test_distserve_profile_refusals_are_short_input_errors(label: str, by_tp: dict, field: str, says: str, tmp_path: Path) -> None:
    """A DistServe profiler file with hostile numbers is an InputError of one short line (an integer beyond float
    was a TypeError of numpy; a long list or key set was repeated whole in the message)."""
    from optfleet.engine.published_profiles import profile_engine
    from optfleet.errors import InputError
    from test_hostile_inputs import MAX_MESSAGE_CHARS

    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"m": by_tp}))
    with pytest.raises(InputError) as error:
        profile_engine(path, None, None, 1, "hardware.performance", "hardware.tp")
    message = str(error.value)
    assert error.value.field.startswith(field) and says in message and len(message) <= MAX_MESSAGE_CHARS, message


def test_a_rate_whose_load_overflows_says_so_not_inf_erlangs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A forecast of 1e308 req/s is infeasible (exit 1); rate x mean service overflows float64, and the message said
    "inf erlangs of load"."""
    forecast = "period,model,rate_rps\n" + "".join(f"{t},chat,1e308\n{t},batch,1\n" for t in range(CAPACITY_PLAN["periods"]))
    _write(tmp_path / "f.csv", forecast)
    doc = {**CAPACITY_PLAN, "demand": {"forecast_file": "f.csv"}}
    _write(tmp_path / "instance.yaml", yaml.safe_dump(doc, sort_keys=False))
    outcome = run_in_process(["solve", str(tmp_path / "instance.yaml"), "--quiet"], capsys)
    text = outcome.stdout + outcome.stderr
    assert outcome.code == 1 and "past a float's range" in text and "inf erlangs" not in text
