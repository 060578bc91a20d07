"""Issue 41: hostile inputs to the newer kinds and commands (reserved, routing, placement, compress, sweep, plot,
simulate, validate, gap): the contract of tests/test_hostile_inputs.py, extended to them.

Bad input ends with exit 2 and ONE stderr line naming the field (and the row, and the value as written), no
traceback, nothing written; valid but extreme input ends with exit 0 or 1 and finite numbers; nothing runs
unbounded.  Every case is data (:class:`Case`), written from the issue's description, and carries the class of the
issue it probes (:data:`CLASSES`): an internal error where a message is due, silent garbage (a non-finite number,
or nonsense accepted), a hang or an unbounded run, or a bad message (the wrong field, row or value, or warnings
before it).  The cases state the behaviour the issue demands; the runner and the checks are the first corpus's
(tests/test_hostile_inputs.py).  A hypothesis test fuzzes the schema of every kind, and compress's options.
"""

from __future__ import annotations

import copy
import json
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import REPO
import test_hostile_inputs as first
from test_hostile_inputs import (
    BIG,
    BIG_TEXT,
    BINARY,
    BOM,
    DELETE,
    INF,
    NAN,
    _load_never_crashes,
    _refuse_opening,
    _strict_json,
    _write,
    assert_bad_input,
    run_in_process,
    run_subprocess,
)

pytestmark = pytest.mark.unit

INSTANCES = REPO / "instances"
TOY_FLEET = INSTANCES / "fleet" / "toy.yaml"
RESERVED_CSV = (INSTANCES / "reserved" / "tiny.csv").read_text()

BASE: dict[str, dict[str, Any]] = {
    "reserved": yaml.safe_load((INSTANCES / "reserved" / "tiny.yaml").read_text()),
    "routing": {**yaml.safe_load((INSTANCES / "routing" / "tiny.yaml").read_text()),
                "fleet": {"instance": str(TOY_FLEET), "boundary_tokens": 2000, "gamma": 1.5}},
    "placement": yaml.safe_load((INSTANCES / "placement" / "tiny.yaml").read_text()),
}

# The classes (its "Why" section), for the counts before and after
INTERNAL, GARBAGE, UNBOUNDED, MESSAGE = "internal error", "silent garbage", "hang or unbounded", "bad message"
CLASSES = (INTERNAL, GARBAGE, UNBOUNDED, MESSAGE)

PROSE = " ".join(f"Sentence number {i} says something about fleets, pools and prompts." for i in range(40))
SYNTHETIC = {"seed": 1, "days": 0.01, "mean_rps": 2.0,
             "classes": [{"name": "chat", "share": 1.0, "input_tokens": {"mean_tokens": 100}, "output_tokens": {"mean_tokens": 20}}]}
RESULTS_CSV = "workload.rate_rps,method,status,objective,objective_unit,gap_pct\n1,a,optimal,2.5,$/h,0\n2,a,optimal,3.5,$/h,1.5\n"
SUB = "subprocess"  # a case that may hang or blow up memory runs in a subprocess with a timeout and a memory limit


@dataclass(frozen=True)
class Case:
    """One hostile input, the behaviour the issue demands of it and the issue's class it probes.

    ``kind``: the instance kind whose shipped tiny instance ``source`` mutates (``{dotted.path: value}``,
    ``DELETE`` removes a key; or a callable ``doc -> doc``; or the file's raw ``str``/``bytes``), or ``file`` for
    commands that read a plain file (compress's prompt, plot's results table): ``source`` is then its content.
    ``command``, ``argv`` (``{dir}`` is the case's folder), ``files`` (beside the instance), ``exit``, ``field``,
    ``value``, ``says`` and ``check`` are as in tests/test_hostile_inputs.py.  ``timeout_s``: a subprocess case's
    limit (the contract's 30 s is for a user's machine; the cases are sized to end well within it)."""

    label: str
    cls: str
    kind: str
    source: Any
    command: str = "solve"
    argv: tuple[str, ...] = ()
    exit: int | tuple[int, ...] = 2
    field: str | tuple[str, ...] | None = None
    value: str | None = None
    says: str | None = None
    files: tuple[tuple[str, Any], ...] = ()
    suffix: str = ".yaml"
    sub: bool = False
    check: Callable[[dict[str, Any]], None] | None = None
    unreadable: str | None = None
    timeout_s: float = 20.0


first.BASE.update(BASE)  # the first corpus's builders (mutated, materialize) make these kinds' instances too
mutated = first.mutated


# ---------------------------------------------------------------------------------------------------------------
# Checks of valid answers
# ---------------------------------------------------------------------------------------------------------------


def some_plan(data: dict[str, Any]) -> None:
    """A main result with a finite objective (non-finite numbers never reach the JSON: _strict_json refuses them)."""
    rows = data.get("results") or data.get("rows") or []
    assert any(r.get("objective") is not None for r in rows), rows


def reserved_notes_one_scenario(data: dict[str, Any]) -> None:
    some_plan(data)
    assert "one scenario" in json.dumps(data), data.get("notes")


def fidelity_says(*words: str) -> Callable[[dict[str, Any]], None]:
    def check(data: dict[str, Any]) -> None:
        text = json.dumps(data["fidelity"])
        assert all(w in text for w in words), data["fidelity"]
    return check


def compressed(data: dict[str, Any]) -> None:
    assert data["fits"] and data["compressed_tokens"] <= data["prompt_budget_tokens"], data


def uncompressed(data: dict[str, Any]) -> None:
    assert data["fits"] and not data["compressed"], data


def milp_stopped_or_skipped(data: dict[str, Any]) -> None:
    """The hindsight MILP's row says why it has no plan or that its time limit applied."""
    row = data["results"][0]
    text = json.dumps(row).lower()
    assert row["method"] == "hindsight_milp" and ("time limit" in text or "time_limit" in text), row


def lookahead_stopped_or_skipped(data: dict[str, Any]) -> None:
    row = data["results"][0]
    text = json.dumps(row).lower()
    assert row["method"] == "lookahead_milp" and (row.get("objective") is not None or "time limit" in text), row


def sweep_rows(count: int) -> Callable[[dict[str, Any]], None]:
    def check(data: dict[str, Any]) -> None:
        assert len({r["overrides"] for r in data["rows"]}) == count, data["rows"][:3]
    return check


# ---------------------------------------------------------------------------------------------------------------
# The corpus
# ---------------------------------------------------------------------------------------------------------------

NAIVE_THEN_AWARE = "t,input_tokens,output_tokens\n2024-01-01T00:00:00,100,10\n2024-01-01T00:00:01,50,5\n2024-01-01T00:00:02+00:00,100,10\n"
AWARE_THEN_NAIVE = "t,input_tokens,output_tokens\n2024-01-01T00:00:00Z,100,10\n2024-01-01 00:00:01,50,5\n"
OFFSETS = "t,input_tokens,output_tokens\n2024-01-01T00:00:00+00:00,100,10\n2024-01-01T02:00:01+02:00,50,5\n2024-01-01T00:00:03Z,80,8\n"
DATETIME = {"trace.file": "t.csv", "trace.time_unit": "datetime"}


def reserved_trace(label: str, cls: str, text: str | bytes, field: Any, value: str | None = None, says: str | None = None,
                   changes: dict[str, Any] | None = None, **kw: Any) -> Case:
    return Case(label, cls, "reserved", {"trace.file": "t.csv", **(changes or {})}, files=(("t.csv", text),), field=field, value=value,
                says=says, **kw)


def reserved_cases() -> list[Case]:
    big_row = RESERVED_CSV.replace("0.4,100,0", "0.4,10000000000000000000,0")
    return [
        # --- time zones (the first internal error) ----------------------------------------------------------
        reserved_trace("reserved: naive then time-zone-aware timestamps", INTERNAL, NAIVE_THEN_AWARE, "trace:t line 4",
                       "2024-01-01T00:00:02+00:00", says="time zone", changes=DATETIME),
        reserved_trace("reserved: aware then naive timestamps", INTERNAL, AWARE_THEN_NAIVE, "trace:t line 3", "2024-01-01 00:00:01",
                       says="time zone", changes=DATETIME),
        reserved_trace("reserved: mixed UTC offsets are one clock", INTERNAL, OFFSETS, None, changes=DATETIME, exit=0, check=some_plan),
        Case("reserved: naive and aware timestamps across two files", INTERNAL, "reserved",
             {"trace.file": ["a.csv", "b.csv"], "trace.time_unit": "datetime"},
             files=(("a.csv", "t,input_tokens,output_tokens\n2024-01-01T00:00:00,100,10\n2024-01-01T00:00:01,100,10\n"),
                    ("b.csv", "t,input_tokens,output_tokens\n2024-01-01T00:00:00+01:00,100,10\n")),
             field="trace:t line 2 of b.csv", says="time zone"),
        reserved_trace("reserved: a date that is no date among aware ones", MESSAGE,
                       "t,input_tokens,output_tokens\n2024-01-01T00:00:00Z,1,1\nyesterday,1,1\n", "trace:t line 3", "yesterday",
                       changes=DATETIME),
        # --- a synthetic trace that draws nothing (the second internal error) ---------------------------------
        Case("reserved: synthetic trace too short to draw a request", INTERNAL, "reserved",
             {"trace": {"synthetic": {**SYNTHETIC, "days": 1e-7}}}, field="trace.synthetic", says="mean_rps"),
        Case("reserved: synthetic trace too sparse to draw a request", INTERNAL, "reserved",
             {"trace": {"synthetic": {**SYNTHETIC, "days": 1.0, "mean_rps": 1e-9}}}, field="trace.synthetic", says="days"),
        Case("reserved: robust scenario trace that draws nothing", INTERNAL, "reserved",
             {"plans.robust": {"traces": [{"synthetic": {**SYNTHETIC, "days": 1e-7}}]}},
             field=("plans.robust.traces.0.synthetic", "plans.robust.traces[0].synthetic"), says="mean_rps"),
        Case("reserved: synthetic trace of one second", INTERNAL, "reserved", {"trace": {"synthetic": {**SYNTHETIC, "days": 1 / 86_400}}},
             exit=(0, 2), field="trace.synthetic", check=some_plan),
        Case("reserved: synthetic class shares summing beyond float", INTERNAL, "reserved",
             {"trace": {"synthetic": {**SYNTHETIC, "classes": [{**SYNTHETIC["classes"][0], "share": 1e308},
                                                                 {**SYNTHETIC["classes"][0], "name": "code", "share": 1e308}]}}},
             field="trace.synthetic.classes.0.share", value="1e+308"),
        Case("reserved: synthetic rate NaN", GARBAGE, "reserved", {"trace": {"synthetic": {**SYNTHETIC, "mean_rps": NAN}}},
             field="trace.synthetic.mean_rps", value="nan"),
        Case("reserved: synthetic days 61", UNBOUNDED, "reserved", {"trace": {"synthetic": {**SYNTHETIC, "days": 61}}},
             field="trace.synthetic.days", value="61"),
        Case("reserved: synthetic expecting 1e12 requests", UNBOUNDED, "reserved",
             {"trace": {"synthetic": {**SYNTHETIC, "days": 60, "mean_rps": 2e5}}}, field="trace.synthetic", says="limit"),
        Case("reserved: synthetic lengths of 1e19 tokens", GARBAGE, "reserved",
             {"trace": {"synthetic": {**SYNTHETIC, "classes": [{**SYNTHETIC["classes"][0], "input_tokens": {"mean_tokens": 1e19}}]}}},
             field="trace.synthetic.classes.0.input_tokens.mean_tokens", value="1e+19"),
        # --- trace files ----------------------------------------------------------------------------------------------
        reserved_trace("reserved: a 1e19-token row", MESSAGE, big_row, "trace:input_tokens line 3", "10000000000000000000"),
        reserved_trace("reserved: a 1e19-token row written 1e19", MESSAGE, RESERVED_CSV.replace("0.4,100,0", "0.4,1e19,0"),
                       "trace:input_tokens line 3", "1e+19"),
        reserved_trace("reserved: trace is binary", INTERNAL, BINARY, "trace.file", "t.csv"),
        reserved_trace("reserved: trace is empty", INTERNAL, "", "trace.file", "t.csv"),
        reserved_trace("reserved: trace of a header only", INTERNAL, "t,input_tokens,output_tokens\n", "trace", says="no requests"),
        reserved_trace("reserved: trace without the t column", INTERNAL, "input_tokens,output_tokens\n1,2\n", "trace", says="t"),
        reserved_trace("reserved: trace with an infinite time", GARBAGE, RESERVED_CSV.replace("1.2,50,50", "inf,50,50"), "trace:t line 4",
                       "inf"),
        reserved_trace("reserved: trace with a negative token count", MESSAGE, RESERVED_CSV.replace("1.2,50,50", "1.2,-50,50"),
                       "trace:input_tokens line 4", "-50"),
        reserved_trace("reserved: trace with a fractional token count", MESSAGE, RESERVED_CSV.replace("1.2,50,50", "1.2,50.5,50"),
                       "trace:input_tokens line 4", "50.5"),
        reserved_trace("reserved: trace with an infinite latency", GARBAGE,
                       "t,input_tokens,output_tokens,latency_s\n0,10,10,0.5\n1,10,10,inf\n", "trace:latency_s line 3", "inf"),
        reserved_trace("reserved: trace of one request", INTERNAL, "t,input_tokens,output_tokens\n0,100,10\n", None, exit=(0, 1, 2),
                       check=some_plan),
        reserved_trace("reserved: every request at one instant", INTERNAL, "t,input_tokens,output_tokens\n5,100,10\n5,50,10\n5,10,1\n",
                       None, exit=(0, 1, 2), check=some_plan),
        reserved_trace("reserved: a trace spanning 1e300 s", UNBOUNDED, "t,input_tokens,output_tokens\n0,100,10\n1e300,100,10\n", "trace",
                       says="limit"),
        reserved_trace("reserved: a cached count above the input", MESSAGE,
                       "t,input_tokens,output_tokens,cached_tokens\n0,100,10,0\n1,100,10,101\n", "trace:cached_tokens line 3", "101"),
        Case("reserved: trace is a directory", INTERNAL, "reserved", {"trace.file": "t.csv"}, files=(("t.csv", "DIRECTORY"),),
             field="trace.file", value="t.csv", says="director"),
        Case("reserved: trace file missing", INTERNAL, "reserved", {"trace.file": "absent.csv"}, field="trace.file", value="absent.csv"),
        # --- magnitudes -------------------------------------------------------------------------------------------------
        Case("reserved: an input weight of 1e308", INTERNAL, "reserved", {"profile.w_in": 1e308}, field="profile.custom.w_in",
             value="1e+308", says="limit"),
        Case("reserved: an output weight of 1e300", MESSAGE, "reserved", {"profile.w_out": 1e300}, field="profile.custom.w_out",
             value="1e+300"),
        Case("reserved: a long-context weight of 1e308", INTERNAL, "reserved",
             {"profile.long_context": {"threshold_input_tokens": 0, "w_in": 1e308, "w_cache": 0, "w_out": 1}},
             field="profile.custom.long_context.w_in", value="1e+308"),
        Case("reserved: cost window of 1e-300 s", MESSAGE, "reserved", {"cost_window_s": 1e-300}, field=("trace", "cost_window_s"),
             says="limit"),
        Case("reserved: cost window of 1e308 s", GARBAGE, "reserved", {"cost_window_s": 1e308}, field="cost_window_s", value="1e+308"),
        Case("reserved: a window of 1e308 s", GARBAGE, "reserved", {"windows_s": [1e308]}, field="windows_s.0", value="1e+308"),
        Case("reserved: tau 1e-300", UNBOUNDED, "reserved", {"profile.tau_tokens_per_s_per_unit": 1e-300},
             field="profile.tau_tokens_per_s_per_unit", says="limit"),
        Case("reserved: max_units 1e6 scans a million units", UNBOUNDED, "reserved", {"max_units": 1_000_000}, exit=0, check=some_plan),
        Case("reserved: max_units beyond the limit", UNBOUNDED, "reserved", {"max_units": 1_000_001}, field="max_units", says="limit"),
        Case("reserved: base latency of 1e308 s", GARBAGE, "reserved", {"baseline_latency.intercept_s": 1e308}, exit=(0, 1, 2),
             field="baseline_latency.intercept_s", check=some_plan),
        Case("reserved: latency target of 1e-300 s", GARBAGE, "reserved", {"plans.latency.threshold_s": 1e-300}, exit=(0, 1),
             says="latency", check=some_plan),
        Case("reserved: latency target of 1e308 s", GARBAGE, "reserved", {"plans.latency.threshold_s": 1e308}, exit=0, check=some_plan),
        Case("reserved: robust pieces longer than the trace", GARBAGE, "reserved", {"plans.robust": {"split_s": 1e308}}, exit=0,
             check=reserved_notes_one_scenario),
        Case("reserved: commitment blocks of 1e-9 s", UNBOUNDED, "reserved",
             {"plans.commitment": {"block_s": 1e-9, "on_demand_per_unit_hour": 2}}, field="plans.commitment.block_s", value="1e-09"),
        Case("reserved: commitment of 10,000 blocks", UNBOUNDED, "reserved",
             {"plans.commitment": {"block_s": 1, "on_demand_per_unit_hour": 2, "term_blocks": 10_000}}, exit=(0, 1), check=some_plan),
        Case("reserved: on-demand price 1e308", GARBAGE, "reserved",
             {"plans.commitment": {"block_s": 1, "on_demand_per_unit_hour": 1e308}}, field="plans.commitment.on_demand_per_unit_hour",
             says="limit"),
        Case("reserved: percentiles of a bool", GARBAGE, "reserved", {"plans.percentiles": [True]}, field="plans.percentiles.0",
             value="True"),
        Case("reserved: headroom NaN", GARBAGE, "reserved", {"headroom_fraction": NAN}, field="headroom_fraction", value="nan"),
        Case("reserved: unknown vertex model", MESSAGE, "reserved", {"profile": {"provider": "vertex", "model": "gemini-9"}},
             field="profile", value="gemini-9"),
        Case("reserved: azure PTU tau beyond the limit", UNBOUNDED, "reserved",
             {"profile": {"provider": "azure_ptu", "tau_tokens_per_s_per_unit": 1e300}}, field="profile.azure_ptu.tau_tokens_per_s_per_unit",
             says="limit"),
        Case("reserved: min_units beyond int64", GARBAGE, "reserved", {"profile.min_units": BIG}, field="profile.custom.min_units",
             value=BIG_TEXT),
        Case("reserved: gap --plot to a non-PNG", MESSAGE, "reserved", {}, command="gap", argv=("--plot", "{dir}/plot.txt"),
             field="--plot", value="plot.txt"),
        Case("reserved: simulate (no simulator)", MESSAGE, "reserved", {}, command="simulate", field="kind", value="reserved"),
        Case("reserved: --time-limit 1e-9", UNBOUNDED, "reserved", {}, argv=("--time-limit", "1e-9"), exit=(0, 1), check=some_plan),
    ]


ROUTING_TINY = {"stream.requests": 300}  # a smaller stream: the valid cases' replays stay fast


def routing_stream(label: str, cls: str, text: str | bytes, field: Any, value: str | None = None, says: str | None = None, **kw: Any) -> Case:
    return Case(label, cls, "routing", {"stream": {"file": "s.csv"}}, files=(("s.csv", text),), field=field, value=value, says=says, **kw)


STREAM = "arrival_s,bytes,input_tokens,output_tokens,category\n0.0,4000,900,100,prose\n0.5,3000,700,200,code\n1.0,2000,500,100,prose\n"


def routing_cases() -> list[Case]:
    def share(value: float) -> dict[str, Any]:
        return {f"categories.{i}.share": value for i in range(4)}

    return [
        # --- shares (the third internal error) -----------------------------------------------------------------
        Case("routing: shares whose sum overflows", INTERNAL, "routing", share(1e308), field="categories.0.share", value="1e+308"),
        Case("routing: two shares of 1e308", INTERNAL, "routing", {"categories.0.share": 1e308, "categories.1.share": 1e308},
             field="categories.0.share", value="1e+308"),
        Case("routing: one share of 1.7e308", INTERNAL, "routing", {**ROUTING_TINY, "categories.2.share": 1.7e308}, exit=(0, 1, 2),
             field="categories.2.share", value="1.7e+308", check=some_plan),
        Case("routing: shares of 1e-320 (subnormal) still route", INTERNAL, "routing", {**ROUTING_TINY, **share(1e-320)}, exit=(0, 1),
             check=some_plan),
        Case("routing: share NaN", GARBAGE, "routing", {"categories.0.share": NAN}, field="categories.0.share", value="nan"),
        Case("routing: share inf", GARBAGE, "routing", {"categories.0.share": INF}, field="categories.0.share", value="inf"),
        Case("routing: share 0", GARBAGE, "routing", {"categories.0.share": 0}, field="categories.0.share", value="0"),
        Case("routing: share a bool", GARBAGE, "routing", {"categories.0.share": True}, field="categories.0.share", value="True"),
        Case("routing: share text", INTERNAL, "routing", {"categories.0.share": "half"}, field="categories.0.share", value="half"),
        # --- categories ----------------------------------------------------------------------------------------------
        Case("routing: no category", INTERNAL, "routing", {"categories": []}, field="categories", value="[]"),
        Case("routing: 4,097 categories", UNBOUNDED, "routing",
             {"categories": [{"name": f"c{i}", "bytes_per_token": 4.0} for i in range(4097)]}, suffix=".json", field="categories"),
        Case("routing: a category twice", MESSAGE, "routing", {"categories.1.name": "prose"}, field="categories", says="unique"),
        Case("routing: empty category name", MESSAGE, "routing", {"categories.1.name": ""}, field="categories.1.name"),
        Case("routing: bytes per token 1e300", GARBAGE, "routing", {"categories.0.bytes_per_token": 1e300},
             field="categories.0.bytes_per_token", value="1e+300"),
        Case("routing: bytes per token at its least", GARBAGE, "routing", {**ROUTING_TINY, "categories.0.bytes_per_token": 0.1}, exit=(0, 1, 2),
             field="fleet.instance", check=some_plan),
        # --- the stream ------------------------------------------------------------------------------------------------
        Case("routing: a stream of one request", INTERNAL, "routing", {"stream.requests": 1}, field="stream.requests", value="1"),
        Case("routing: a stream beyond the limit", UNBOUNDED, "routing", {"stream.requests": 5_000_001}, field="stream.requests",
             says="limit"),
        Case("routing: stream spread NaN", GARBAGE, "routing", {"stream.bytes_per_token_spread": NAN}, field="stream.bytes_per_token_spread",
             value="nan"),
        Case("routing: stream seed beyond int64", GARBAGE, "routing", {**ROUTING_TINY, "stream.seed": BIG}, exit=(0, 2), field="stream.seed",
             check=some_plan),
        routing_stream("routing: stream file with a 1e19-byte request", MESSAGE, STREAM.replace("0.5,3000", "0.5,10000000000000000000"),
                       "stream.bytes", "10000000000000000000", says="row 2"),
        routing_stream("routing: stream file with a 1e19-token request", MESSAGE, STREAM.replace("700,200", "10000000000000000000,200"),
                       "stream.input_tokens", "10000000000000000000", says="row 2"),
        routing_stream("routing: stream file with an infinite arrival", GARBAGE, STREAM.replace("1.0,2000", "inf,2000"), "stream.arrival_s",
                       "inf"),
        routing_stream("routing: stream file is binary", INTERNAL, BINARY, "stream.file", "s.csv"),
        routing_stream("routing: stream file is empty", INTERNAL, "", "stream.file", "s.csv"),
        routing_stream("routing: stream file of a header only", INTERNAL, STREAM.splitlines()[0] + "\n", "stream.file", "s.csv"),
        routing_stream("routing: stream file is a directory", INTERNAL, "DIRECTORY", "stream.file", "s.csv"),
        routing_stream("routing: stream file with an unknown category", MESSAGE, STREAM.replace("code", "poetry"), "stream.category", "poetry"),
        routing_stream("routing: stream file of one instant", INTERNAL, STREAM.replace("0.5,", "0.0,").replace("1.0,", "0.0,"), "stream.file",
                       says="instant"),
        routing_stream("routing: stream request above the long window", MESSAGE, STREAM.replace("900,100", "9000,100"), "stream.file",
                       says="window"),
        # --- the fleet ------------------------------------------------------------------------------------------------
        Case("routing: fleet instance missing", INTERNAL, "routing", {"fleet.instance": "absent.yaml"}, field="fleet.instance",
             value="absent.yaml"),
        Case("routing: fleet instance is binary", INTERNAL, "routing", {"fleet.instance": "f.yaml"}, files=(("f.yaml", BINARY),),
             field="fleet.instance", value="f.yaml"),
        Case("routing: fleet instance of another kind", MESSAGE, "routing", {"fleet.instance": str(INSTANCES / "caching" / "tiny.yaml")},
             field="fleet.instance", says="caching"),
        Case("routing: fleet instance is the routing instance", INTERNAL, "routing", {"fleet.instance": "instance.yaml"},
             field="fleet.instance", says="routing"),
        Case("routing: unknown fleet method", MESSAGE, "routing", {"fleet.boundary_tokens": DELETE, "fleet.method": "teleport"},
             field="fleet.method", value="teleport"),
        Case("routing: fleet plan is a number", INTERNAL, "routing", {"fleet.boundary_tokens": DELETE, "fleet.plan": 5},
             field="fleet.plan", value="5"),
        Case("routing: fleet plan without pools", INTERNAL, "routing", {"fleet.boundary_tokens": DELETE, "fleet.plan": {"gamma": 1.0}},
             field="fleet.plan"),
        Case("routing: boundary beyond int64", GARBAGE, "routing", {"fleet.boundary_tokens": BIG}, field="fleet.boundary_tokens",
             value=BIG_TEXT),
        Case("routing: boundary above the long window", MESSAGE, "routing", {"fleet.boundary_tokens": 8000}, field="fleet.boundary_tokens",
             value="8000"),
        Case("routing: C&R gamma of 1e308", GARBAGE, "routing", {**ROUTING_TINY, "fleet.gamma": 1e308}, exit=(0, 1, 2), field="fleet.gamma",
             check=some_plan),
        Case("routing: TTFT SLO of 1e-300 ms", GARBAGE, "routing", {"fleet.ttft_p99_ms": 1e-300}, exit=(1, 2), field="fleet",
             says="SLO"),
        # --- calibrator, dispatcher, exact views -----------------------------------------------------------------------
        Case("routing: calibrator beta 1e308", GARBAGE, "routing", {"calibrator.beta": 1e308}, field="calibrator.beta", value="1e+308"),
        Case("routing: calibrator decay NaN", GARBAGE, "routing", {"calibrator.decay": NAN}, field="calibrator.decay", value="nan"),
        Case("routing: calibrator gamma -1e308", GARBAGE, "routing", {"calibrator.gamma": -1e308}, field="calibrator.gamma", value="-1e+308"),
        Case("routing: warm-up samples beyond int64", GARBAGE, "routing", {**ROUTING_TINY, "calibrator.warmup_samples": BIG}, exit=(0, 1, 2),
             field="calibrator.warmup_samples", value=BIG_TEXT, check=some_plan),
        Case("routing: max categories 0", INTERNAL, "routing", {"calibrator.max_categories": 0}, field="calibrator.max_categories", value="0"),
        Case("routing: queue limit beyond int64", GARBAGE, "routing", {**ROUTING_TINY, "dispatcher.queue_limit": BIG}, exit=(0, 1, 2),
             field="dispatcher.queue_limit", check=some_plan),
        Case("routing: pressure limit 1e-300", GARBAGE, "routing", {**ROUTING_TINY, "dispatcher.pressure_limit": 1e-300}, exit=(0, 1),
             check=some_plan),
        Case("routing: compress gamma inf", GARBAGE, "routing", {"dispatcher.compress_gamma": INF}, field="dispatcher.compress_gamma",
             value="inf"),
        Case("routing: capacity windows of 1e-9 s", UNBOUNDED, "routing", {"exact.window_s": 1e-9}, field="exact.window_s", says="most"),
        Case("routing: design thresholds of 1e-300", GARBAGE, "routing", {"design.threshold_fractions": [1e-300]},
             field="design.threshold_fractions", exit=(0, 1, 2), check=some_plan, command="gap", argv=("--methods", "design")),
        Case("routing: design gammas of 1e308", GARBAGE, "routing", {"design.gammas": [1e308]}, field="design.gammas.0", exit=(0, 1, 2),
             check=some_plan, command="gap", argv=("--methods", "design")),
        Case("routing: 33 queue limits", UNBOUNDED, "routing", {"design.queue_limits": list(range(33))}, field="design.queue_limits"),
        Case("routing: short windows beyond int64", GARBAGE, "routing", {"design.short_windows_tokens": [BIG]},
             field="design.short_windows_tokens.0", value=BIG_TEXT),
        Case("routing: warm-up share 1", GARBAGE, "routing", {"replay.warmup_share": 1.0}, field="replay.warmup_share", value="1.0"),
        Case("routing: gap --plot (no plot)", MESSAGE, "routing", {}, command="gap", argv=("--plot", "{dir}/p.png"), field="--plot",
             says="no plot"),
        Case("routing: simulate (no simulator)", MESSAGE, "routing", {}, command="simulate", field="kind", value="routing"),
    ]


PLACEMENT_FAST = ("--method", "round_robin")


def placement_trace(label: str, cls: str, text: str | bytes, field: Any, value: str | None = None, says: str | None = None, **kw: Any) -> Case:
    changes = {"workload": {"seed": 0, "trace": {"file": "w.csv"}}}
    return Case(label, cls, "placement", changes, argv=PLACEMENT_FAST, files=(("w.csv", text),), field=field, value=value, says=says, **kw)


WORKLOAD = "arrival_s,prompt_tokens,output_tokens\n0.0,100,10\n0.1,200,20\n0.2,150,5\n"


def placement_cases() -> list[Case]:
    many = {"workload.arrivals.requests": 2000, "workload.arrivals.rate_rps": 1000, "solve.max_milp_requests": 5000}
    return [
        # --- work limits of the exact views (the unbounded placement MILP) --------------------------------------
        Case("placement: hindsight MILP of 2,000 requests, 5 s limit", UNBOUNDED, "placement", {**many, "solve.time_limit_s": 5},
             argv=("--method", "hindsight_milp"), exit=(0, 1, 2), field="--method", says="solve.time_limit_s = 5 s",
             check=milp_stopped_or_skipped, sub=True, timeout_s=40),
        Case("placement: hindsight MILP of 40 requests on 10,000 servers, 5 s limit", UNBOUNDED, "placement",
             {"servers.0.count": 10_000, "solve.time_limit_s": 5}, argv=("--method", "hindsight_milp"), exit=(0, 1, 2), field="--method",
             says="solve.time_limit_s = 5 s", check=milp_stopped_or_skipped),
        Case("placement: look-ahead MILP on 10,000 servers, 5 s limit", UNBOUNDED, "placement",
             {"servers.0.count": 10_000, "solve.time_limit_s": 5}, argv=("--method", "lookahead_milp"), exit=(0, 1, 2), field="--method",
             says="solve.time_limit_s", check=lookahead_stopped_or_skipped),
        Case("placement: MILP size limit beyond its cap", UNBOUNDED, "placement", {"solve.max_milp_requests": 5001},
             field="solve.max_milp_requests", says="limit"),
        Case("placement: time limit NaN", GARBAGE, "placement", {"solve.time_limit_s": NAN}, field="solve.time_limit_s", value="nan"),
        Case("placement: time limit 1e-9", UNBOUNDED, "placement", {"solve.time_limit_s": 1e-9}, argv=("--method", "hindsight_milp"),
             exit=(0, 1, 2), field="--method", says="solve.time_limit_s", check=milp_stopped_or_skipped),
        Case("placement: look-ahead window beyond its cap", UNBOUNDED, "placement", {"solve.lookahead_requests": 1001},
             field="solve.lookahead_requests", says="limit"),
        Case("placement: look-ahead commit beyond the window", MESSAGE, "placement", {"solve.lookahead_requests": 4, "solve.lookahead_commit": 8},
             field="solve.lookahead_commit", value="8"),
        # --- the workload --------------------------------------------------------------------------------------------
        placement_trace("placement: trace with a 1e19-token prompt", MESSAGE, WORKLOAD.replace("0.1,200", "0.1,10000000000000000000"),
                        "workload.trace.file:prompt_tokens", "10000000000000000000", says="row 2"),
        placement_trace("placement: trace with a 1e19-token prompt written 1e19", MESSAGE, WORKLOAD.replace("0.1,200", "0.1,1e19"),
                        "workload.trace.file:prompt_tokens", "1e19", says="row 2"),
        placement_trace("placement: trace with an infinite arrival", GARBAGE, WORKLOAD.replace("0.2,150", "inf,150"),
                        "workload.trace.file:arrival_s", "inf"),
        placement_trace("placement: trace arriving after 1e300 s", UNBOUNDED, WORKLOAD.replace("0.2,150", "1e300,150"),
                        "workload.trace.file:arrival_s", says="limit"),
        placement_trace("placement: trace is binary", INTERNAL, BINARY, "workload.trace.file", "w.csv"),
        placement_trace("placement: trace is empty", INTERNAL, "", "workload.trace.file", "w.csv"),
        placement_trace("placement: trace is a directory", INTERNAL, "DIRECTORY", "workload.trace.file", "w.csv"),
        placement_trace("placement: trace with NUL bytes", INTERNAL, WORKLOAD.replace("0.1,200", "0.1,2\x000"), "workload.trace.file", "w.csv"),
        placement_trace("placement: trace of a header only", INTERNAL, WORKLOAD.splitlines()[0] + "\n", "workload.trace.file", "w.csv"),
        placement_trace("placement: trace with a zero-token output", MESSAGE, WORKLOAD.replace("150,5", "150,0"),
                        "workload.trace.file:output_tokens", "0", says="row 3"),
        Case("placement: arrival rate 1e308", GARBAGE, "placement", {"workload.arrivals.rate_rps": 1e308}, argv=PLACEMENT_FAST,
             exit=(0, 2), field="workload.arrivals.rate_rps", check=some_plan),
        Case("placement: arrival rate 1e-300", UNBOUNDED, "placement", {"workload.arrivals.rate_rps": 1e-300}, argv=PLACEMENT_FAST,
             field="workload.arrivals", says="limit"),
        Case("placement: 1e8-token system prompts", UNBOUNDED, "placement", {"workload.shared_prefix.system_prompt_len": 100_000_000},
             argv=PLACEMENT_FAST, exit=(0, 1, 2), field=("workload.shared_prefix.system_prompt_len", "servers.0.kv_capacity_blocks"),
             check=some_plan, sub=True),
        Case("placement: question length sd 1e308", GARBAGE, "placement", {"workload.shared_prefix.question_len_sd": 1e308},
             field="workload.shared_prefix.question_len_sd", says="limit"),
        Case("placement: stepped ladder of zero duration", INTERNAL, "placement",
             {"workload.arrivals": {"process": "stepped", "steps": [{"rate_rps": 1, "duration_s": 0}]}},
             field="workload.arrivals.steps.0.duration_s", value="0"),
        Case("placement: stepped ladder drawing no request", INTERNAL, "placement",
             {"workload.arrivals": {"process": "stepped", "steps": [{"rate_rps": 1e-9, "duration_s": 1}]}}, argv=PLACEMENT_FAST,
             field="workload.arrivals", says="no arrival"),
        Case("placement: users beyond the limit", UNBOUNDED, "placement", {"workload.shared_prefix.num_groups": 100_000,
             "workload.shared_prefix.num_prompts_per_group": 100_000}, field="workload.shared_prefix.num_prompts_per_group", says="limit"),
        # --- servers and policies --------------------------------------------------------------------------------------
        Case("placement: no server", INTERNAL, "placement", {"servers": []}, field="servers", value="[]"),
        Case("placement: prefill 1e308 ms per token", GARBAGE, "placement", {"servers.0.timing.prefill_ms_per_token": 1e308},
             field="servers.0.timing.prefill_ms_per_token", says="limit"),
        Case("placement: step base 1e-300 ms", GARBAGE, "placement", {"servers.0.timing.step_base_ms": 1e-300}, argv=PLACEMENT_FAST,
             exit=(0, 2), field="servers.0.timing.step_base_ms", check=some_plan),
        Case("placement: one KV block per server", INTERNAL, "placement", {"servers.0.kv_capacity_blocks": 1}, argv=PLACEMENT_FAST,
             exit=(1, 2), field="servers.0.kv_capacity_blocks", says="block"),
        Case("placement: server count beyond the limit", UNBOUNDED, "placement", {"servers.0.count": 10**9}, field="servers.0.count",
             says="limit"),
        Case("placement: load_prefix weights of 1e308", GARBAGE, "placement",
             {"policies": [{"name": "load_prefix", "weights": {"prefix": 1e308, "queue": 1, "kv": 1}}]}, field="policies.0.weights.prefix",
             says="limit"),
        Case("placement: predicted latency buffer 1e308", GARBAGE, "placement",
             {"policies": [{"name": "predicted_latency", "buffer": 1e308}]}, argv=("--method", "predicted_latency"), exit=(0, 2),
             field="policies.0.buffer", check=some_plan),
        Case("placement: unknown policy", MESSAGE, "placement", {"policies": ["fifo"]}, field="policies", value="fifo"),
        Case("placement: policy of a number", INTERNAL, "placement", {"policies": [5]}, field="policies.0", value="5"),
        Case("placement: SLO NaN", GARBAGE, "placement", {"slo.ttft_ms": NAN}, field="slo.ttft_ms", value="nan"),
        Case("placement: block of 4,097 tokens", UNBOUNDED, "placement", {"block_tokens": 4097}, field="block_tokens", says="limit"),
        # --- simulate -------------------------------------------------------------------------------------------------
        Case("placement: simulate --plan of the wrong length", MESSAGE, "placement", {}, command="simulate",
             argv=("--plan", "{dir}/plan.json"), files=(("plan.json", json.dumps([0, 1, 0])),), field="--plan", says="40"),
        Case("placement: simulate --plan naming server 7", MESSAGE, "placement", {}, command="simulate",
             argv=("--plan", "{dir}/plan.json"), files=(("plan.json", json.dumps([7] * 40)),), field="--plan", value="7"),
        Case("placement: simulate --plan with NaN", GARBAGE, "placement", {}, command="simulate", argv=("--plan", "{dir}/plan.json"),
             files=(("plan.json", "[" + ", ".join(["NaN"] + ["0"] * 39) + "]"),), field="--plan", value="nan"),
        Case("placement: simulate --plan with booleans", GARBAGE, "placement", {}, command="simulate", argv=("--plan", "{dir}/plan.json"),
             files=(("plan.json", json.dumps([True] * 40)),), field="--plan", value="True"),
        Case("placement: simulate --plan is binary", INTERNAL, "placement", {}, command="simulate", argv=("--plan", "{dir}/plan.json"),
             files=(("plan.json", BINARY),), field="--plan", value="plan.json"),
        Case("placement: simulate --plan is a directory", INTERNAL, "placement", {}, command="simulate", argv=("--plan", "{dir}/plan.json"),
             files=(("plan.json", "DIRECTORY"),), field="--plan", value="plan.json"),
        Case("placement: simulate --plan of a mapping without placement", MESSAGE, "placement", {}, command="simulate",
             argv=("--plan", "{dir}/plan.json"), files=(("plan.json", json.dumps({"pools": []})),), field="--plan", says="placement"),
        Case("placement: simulate --reps 0", MESSAGE, "placement", {}, command="simulate", argv=("--method", "round_robin", "--reps", "0"),
             field="--reps", value="0"),
        Case("placement: simulate --reps 1e9", UNBOUNDED, "placement", {}, command="simulate",
             argv=("--method", "round_robin", "--reps", "1000000000"), field="--reps", value="1000000000"),
        Case("placement: simulate --seed -1", MESSAGE, "placement", {}, command="simulate", argv=("--method", "round_robin", "--seed", "-1"),
             field="--seed", value="-1"),
        Case("placement: simulate the relaxation bound", MESSAGE, "placement", {}, command="simulate", argv=("--method", "relaxation_bound"),
             field="--method", value="relaxation_bound"),
        Case("placement: simulate --seed beyond int64", GARBAGE, "placement", {}, command="simulate",
             argv=("--method", "round_robin", "--reps", "1", "--seed", BIG_TEXT), exit=(0, 2), field="--seed", check=lambda d: None),
    ]


def compress_case(label: str, cls: str, text: str | bytes, *argv: str, budget: str = "120", **kw: Any) -> Case:
    return Case(label, cls, "file", text, command="compress", argv=("--budget-tokens", budget, *argv), suffix=".txt", **kw)


CONTROL = bytes(range(32)) * 64
HUGE_PROMPT = " ".join(f"Sentence {i} tells a fleet about pools and routes, {i % 97} times over." for i in range(60_000))


def compress_cases() -> list[Case]:
    return [
        # --- the file (the silent garbage: control bytes echoed back) -----------------------------------------
        compress_case("compress: a prompt of NUL and control bytes", GARBAGE, CONTROL, field="FILE", value="prompt.txt", says="binary"),
        compress_case("compress: a prompt with one NUL byte", GARBAGE, PROSE.replace("Sentence number 3", "Sentence\x00number 3"),
                      field="FILE", value="prompt.txt", says="binary"),
        compress_case("compress: a prompt of NUL bytes only", GARBAGE, b"\x00" * 4096, field="FILE", value="prompt.txt", says="binary"),
        compress_case("compress: a binary prompt", INTERNAL, BINARY, field="FILE", value="prompt.txt"),
        compress_case("compress: a Latin-1 prompt", MESSAGE, ("Café. " * 50).encode("latin-1"), field="FILE", value="prompt.txt",
                      says="UTF-8"),
        compress_case("compress: an empty prompt", INTERNAL, "", field="FILE", value="prompt.txt", says="empty"),
        compress_case("compress: a blank prompt", INTERNAL, " \n\t\n", field="FILE", value="prompt.txt", says="empty"),
        compress_case("compress: a prompt without a sentence boundary", MESSAGE, "word " * 500, field="FILE", says="sentence"),
        compress_case("compress: a UTF-16 prompt is read", INTERNAL, PROSE.encode("utf-16"), exit=0, check=compressed),
        compress_case("compress: a UTF-8 BOM is not part of the prompt", GARBAGE, BOM + PROSE.encode(), exit=0,
                      check=lambda d: compressed(d) or (not d["text"].startswith("\ufeff") or pytest.fail(d["text"][:20]))),
        Case("compress: the prompt is a directory", INTERNAL, "file", "DIRECTORY", command="compress", argv=("--budget-tokens", "60"),
             suffix=".txt", field="FILE", value="prompt.txt", says="director"),
        Case("compress: the prompt file is missing", INTERNAL, "file", None, command="compress", argv=("--budget-tokens", "60"),
             suffix=".txt", field="FILE", value="prompt.txt", says="not found"),
        Case("compress: the prompt is unreadable", INTERNAL, "file", PROSE, command="compress", argv=("--budget-tokens", "60"),
             suffix=".txt", unreadable="prompt.txt", field="FILE", value="prompt.txt", says="permission"),
        # --- options ----------------------------------------------------------------------------------------------------
        compress_case("compress: budget 0", MESSAGE, PROSE, budget="0", field="--budget-tokens", value="0"),
        compress_case("compress: budget beyond int64", GARBAGE, PROSE, budget=BIG_TEXT, exit=(0, 2), field="--budget-tokens",
                      check=uncompressed),
        compress_case("compress: output tokens beyond the budget", MESSAGE, PROSE, "--output-tokens", "120", field="--output-tokens",
                      value="120"),
        compress_case("compress: negative output tokens", MESSAGE, PROSE, "--output-tokens", "-1", field="--output-tokens", value="-1"),
        compress_case("compress: unknown category", MESSAGE, PROSE, "--category", "poetry", field="--category", value="poetry"),
        compress_case("compress: time limit NaN", GARBAGE, PROSE, "--exact", "--time-limit", "nan", field="--time-limit", value="nan"),
        compress_case("compress: time limit inf", GARBAGE, PROSE, "--exact", "--time-limit", "inf", exit=(0, 2), field="--time-limit",
                      check=compressed),
        compress_case("compress: time limit 0", MESSAGE, PROSE, "--exact", "--time-limit", "0", field="--time-limit", value="0"),
        compress_case("compress: exact with a time limit of 1e-9 s", UNBOUNDED, PROSE, "--exact", "--time-limit", "1e-9", exit=0,
                      check=compressed),
        compress_case("compress: budget below the kept sentences", MESSAGE, PROSE, budget="5", field="--budget-tokens", says="at least"),
        # --- huge prompts: fidelity bounded, and the output says so -----------------------------------------------------
        compress_case("compress: a 4 MB prompt's fidelity is bounded and says so", UNBOUNDED, HUGE_PROMPT, budget="50000", exit=0,
                      check=fidelity_says("ROUGE-L", "sample", "TF-IDF")),
        compress_case("compress: a prompt over the document limit", UNBOUNDED, lambda: "A sentence. " * (6 * 2**20), budget="50000",
                      field="FILE", says="bytes", sub=True),
    ]


def sweep_case(label: str, cls: str, kind: str, *sets: str, changes: dict[str, Any] | None = None, **kw: Any) -> Case:
    argv = tuple(a for s in sets for a in ("--set", s)) + ("--engine", "serial", *kw.pop("argv", ()))
    return Case(label, cls, kind, changes or {}, command="sweep", argv=argv, **kw)


def sweep_cases() -> list[Case]:
    return [
        sweep_case("sweep: routing shares swept to 1e308", INTERNAL, "routing", "categories.0.share=1e308,2", "categories.1.share=1e308,3",
                   argv=("--zip",), field="categories.0.share", says="scenario 0"),
        sweep_case("sweep: reserved weights swept to 1e308", INTERNAL, "reserved", "profile.w_in=1,1e308", field="profile.custom.w_in",
                   says="scenario 1"),
        sweep_case("sweep: reserved synthetic trace swept to nothing", INTERNAL, "reserved", "trace.synthetic.days=1e-7,0.01",
                   changes={"trace": {"synthetic": SYNTHETIC}}, exit=(0, 1, 2), field="trace.synthetic",
                   check=lambda d: any(r.get("error") for r in d["rows"]) or pytest.fail(str(d["rows"][:2]))),
        sweep_case("sweep: reserved prices over a range", GARBAGE, "reserved", "prices.unit_per_hour=1:3:1", exit=0, check=sweep_rows(3)),
        sweep_case("sweep: a range of 1e300 steps", UNBOUNDED, "reserved", "prices.unit_per_hour=0:1e308:1e-300",
                   field="prices.unit_per_hour", says="1,000,000"),
        sweep_case("sweep: a range beyond decimal arithmetic", INTERNAL, "reserved", "prices.unit_per_hour=1e999999999:2e999999999:1",
                   field="prices.unit_per_hour"),
        sweep_case("sweep: a product of 1e6+ scenarios", UNBOUNDED, "reserved", "prices.unit_per_hour=1:1000:1", "headroom_fraction=0:1:0.001",
                   field="--set", says="scenarios"),
        sweep_case("sweep: NaN as a value", GARBAGE, "placement", "slo.ttft_ms=.nan", field="slo.ttft_ms", value="nan"),
        sweep_case("sweep: placement time limit 1e-9", UNBOUNDED, "placement", "solve.time_limit_s=1e-9", argv=("--methods", "hindsight_milp"),
                   exit=(0, 1), check=lambda d: None),
        sweep_case("sweep: unknown field", MESSAGE, "routing", "stream.speed=1,2", field="stream.speed"),
        sweep_case("sweep: a field swept twice", MESSAGE, "reserved", "max_units=5", "max_units=6", field="--set", says="twice"),
        sweep_case("sweep: zipped lists of two lengths", MESSAGE, "reserved", "max_units=5,6", "headroom_fraction=0", argv=("--zip",),
                   field="--zip"),
        sweep_case("sweep: --workers 0", MESSAGE, "reserved", "max_units=5", argv=("--workers", "0"), field="--workers", value="0"),
        sweep_case("sweep: unknown engine", MESSAGE, "reserved", "max_units=5", argv=("--engine", "ray"), field="--engine", value="ray"),
        sweep_case("sweep: dask with a malformed scheduler", INTERNAL, "reserved", "max_units=5",
                   argv=("--engine", "dask", "--scheduler", "notaurl"), field="--scheduler", value="notaurl"),
        sweep_case("sweep: connect timeout NaN", GARBAGE, "reserved", "max_units=5", argv=("--engine", "dask", "--connect-timeout-s", "nan"),
                   field="--connect-timeout-s", value="nan"),
        sweep_case("sweep: results file of another type", MESSAGE, "reserved", "max_units=5", argv=("--out", "{dir}/out/r.txt"),
                   field="--out", value="r.txt"),
        sweep_case("sweep: results file that is not a sweep's", MESSAGE, "reserved", "max_units=5", argv=("--out", "{dir}/r.csv"),
                   files=(("r.csv", "a,b\n1,2\n"),), field="--out", value="r.csv"),
        sweep_case("sweep: results file that is binary", INTERNAL, "reserved", "max_units=5", argv=("--out", "{dir}/r.csv"),
                   files=(("r.csv", BINARY),), field="--out", value="r.csv"),
        sweep_case("sweep: unknown method", MESSAGE, "placement", "slo.ttft_ms=100", argv=("--methods", "teleport"), field="--methods",
                   value="teleport"),
    ]


def plot_case(label: str, cls: str, text: str | bytes, *argv: str, **kw: Any) -> Case:
    return Case(label, cls, "file", text, command="plot", argv=argv or ("--x", "workload.rate_rps", "--y", "objective"),
                **{"suffix": ".csv", **kw})


def plot_cases() -> list[Case]:
    return [
        plot_case("plot: a results file of NUL bytes", GARBAGE, b"\x00" * 512, field="FILE", value="results.csv"),
        plot_case("plot: a results file with NUL bytes in a header", GARBAGE, RESULTS_CSV.replace("method", "me\x00thod"), field="FILE",
                  value="results.csv"),
        plot_case("plot: a binary results file", INTERNAL, BINARY, field="FILE", value="results.csv"),
        plot_case("plot: an empty results file", INTERNAL, "", field="FILE", value="results.csv"),
        plot_case("plot: a results file of another type", MESSAGE, RESULTS_CSV, suffix=".txt", field="FILE", value="results.txt"),
        plot_case("plot: a column that is not there", MESSAGE, RESULTS_CSV, "--x", "slo.ttft_p99_ms", "--y", "objective", field="--x",
                  value="slo.ttft_p99_ms"),
        plot_case("plot: no row with both columns", MESSAGE, RESULTS_CSV.replace(",0\n", ",\n").replace(",1.5\n", ",\n"), "--x",
                  "workload.rate_rps", "--y", "gap_pct", field="--y", value="gap_pct"),
        plot_case("plot: an x column mixing numbers and text", INTERNAL, RESULTS_CSV.replace("\n2,a", "\nmany,a"), exit=(0, 2),
                  field="--x", check=lambda d: None),
        plot_case("plot: infinite objectives", GARBAGE, RESULTS_CSV.replace("3.5", "inf"), exit=(0, 2), field="--y", check=lambda d: None),
        plot_case("plot: an output that is not a PNG", MESSAGE, RESULTS_CSV, "--x", "workload.rate_rps", "--y", "objective", "--out",
                  "{dir}/out/plot.txt", field="--out", value="plot.txt"),
        plot_case("plot: an output below a file", MESSAGE, RESULTS_CSV, "--x", "workload.rate_rps", "--y", "objective", "--out",
                  "{dir}/taken/plot.png", files=(("taken", "here"),), field="--out", value="taken"),
        plot_case("plot: an unknown hue", MESSAGE, RESULTS_CSV, "--x", "workload.rate_rps", "--y", "objective", "--hue", "colour",
                  field="--hue", value="colour"),
    ]


def validate_cases() -> list[Case]:
    """The same hostile files through validate and gap: the reader refuses them before any method runs."""
    return [
        Case("validate: reserved instance of NUL bytes", GARBAGE, "reserved", b"\x00" * 64, command="validate", field="instance"),
        Case("validate: routing instance of control bytes", GARBAGE, "routing", CONTROL, command="validate", field="instance"),
        Case("validate: placement instance in Latin-1", MESSAGE, "placement", "kind: placement\nname: café\n".encode("latin-1"),
             command="validate", field="instance", says="UTF-8"),
        Case("validate: reserved naive then aware timestamps", INTERNAL, "reserved", DATETIME, files=(("t.csv", NAIVE_THEN_AWARE),),
             command="validate", field="trace:t line 4", says="time zone"),
        Case("validate: routing shares that overflow", INTERNAL, "routing", {"categories.0.share": 1e308, "categories.1.share": 1e308},
             command="validate", field="categories.0.share"),
        Case("validate: placement 10,000 servers", UNBOUNDED, "placement", {"servers.0.count": 10_000}, command="validate", exit=0,
             check=lambda d: d["valid"] or pytest.fail(str(d))),
        Case("gap: reserved unknown method", MESSAGE, "reserved", {}, command="gap", argv=("--methods", "teleport"), field="--methods",
             value="teleport"),
        Case("gap: routing --methods of commas", MESSAGE, "routing", {}, command="gap", argv=("--methods", ",,"), field="--methods"),
        Case("gap: placement --out is a file", MESSAGE, "placement", {}, command="gap", argv=("--out", "{dir}/taken"),
             files=(("taken", "here"),), field="--out", value="taken"),
        Case("gap: placement --time-limit -1", MESSAGE, "placement", {}, command="gap", argv=("--time-limit", "-1"),
             field=("--time-limit", "solve.time_limit_s"), value="-1"),
        Case("gap: reserved --time-limit inf", GARBAGE, "reserved", {}, command="gap", argv=("--time-limit", "inf"),
             field=("--time-limit", "solve.time_limit_s"), value="inf"),
        Case("solve: routing --preset on a routing file", MESSAGE, "routing", {}, argv=("--preset", "paper"), field=("--preset", "preset")),
        Case("solve: placement --solver unknown", MESSAGE, "placement", {}, argv=("--solver", "nosuchsolver", "--method", "hindsight_milp"),
             field=("--solver", "solve.solver"), value="nosuchsolver"),
    ]


def token_row_cases() -> list[Case]:
    """The issue's 1e19-token row in the first kinds' traces: the right row, the value as written, no numpy warning."""
    huge = "10000000000000000000"
    fleet_trace = {"workload.lengths": {"trace_file": "trace.csv"}, "pools.short_window_candidates": DELETE,
                   "hardware.slots": {"kv_tokens_per_gpu": 8000}}
    return [
        Case("fleet: a trace row with a 1e19-token input", MESSAGE, "fleet", fleet_trace, command="validate",
             files=(("trace.csv", first.TRACE_CSV.replace("750,250\n3000", f"{huge},250\n3000")),),
             field="workload.lengths.trace_file:l_in row 5", value=huge),
        Case("fleet: a trace row with a 1e19-token output", MESSAGE, "fleet", fleet_trace, command="validate",
             files=(("trace.csv", first.TRACE_CSV.replace("3000,1000", f"3000,{huge}")),), field="workload.lengths.trace_file:l_out row 6",
             value=huge),
        Case("caching: a trace row with a 1e19-token prompt", INTERNAL, "caching", {},
             files=(("tiny.csv", first.CACHING_CSV.replace("B,1,40,40", f"B,1,{huge},40")),), field="trace.q", value=huge, says="row 2"),
        Case("caching: a trace row with a 1e19-token answer written 1e19", INTERNAL, "caching", {},
             files=(("tiny.csv", first.CACHING_CSV.replace("B,1,40,40", "B,1,40,1e19")),), field="trace.a", value="1e+19", says="row 2"),
    ]


CASES: list[Case] = token_row_cases() + reserved_cases() + routing_cases() + placement_cases() + compress_cases() + sweep_cases() + plot_cases() + validate_cases()
assert len({c.label for c in CASES}) == len(CASES), "case labels must be unique"
assert all(c.cls in CLASSES for c in CASES)


# ---------------------------------------------------------------------------------------------------------------
# Running a case
# ---------------------------------------------------------------------------------------------------------------


def materialize(case: Case, folder: Path) -> Path:
    """Write the case's file (an instance: the first corpus's way; a prompt or a results table: its content) and the
    files beside it; returns its path."""
    if case.kind != "file":
        if case.kind == "reserved" and "tiny.csv" not in {name for name, _ in case.files}:
            _write(folder / "tiny.csv", RESERVED_CSV)
        return first.materialize(case, folder)  # type: ignore[arg-type]
    path = folder / (("prompt" if case.command == "compress" else "results") + case.suffix)
    if case.source is not None:
        _write(path, case.source() if callable(case.source) else case.source)
    for name, content in case.files:
        _write(folder / name, content)
    return path


OUT_FILE = {"sweep": ("--json", "--out", "{dir}/out/results.csv", "--quiet"), "plot": ("--out", "{dir}/out/plot.png"),
            "compress": ("--json", "--quiet")}
"""The options a command gets beyond the case's: what the first corpus's argv_of gives instance commands (--json,
--out DIR, --quiet), for the commands it does not know (sweep's --out is a results file, plot prints no JSON)."""


def argv_of(case: Case, path: Path, folder: Path) -> list[str]:
    if case.command not in OUT_FILE:
        return first.argv_of(case, path, folder)  # type: ignore[arg-type]
    extra = OUT_FILE[case.command]
    if "--out" in case.argv:  # the case names its own output
        extra = tuple(a for a in extra if a != "--out" and not a.startswith("{dir}/out"))
    return [case.command, str(path), *(a.replace("{dir}", str(folder)) for a in (*case.argv, *extra))]


def assert_answer(case: Case, outcome: Any, folder: Path) -> None:
    """Exit 0 or 1: no traceback, no warning, strict JSON (no NaN or infinity) where the command prints JSON."""
    what = outcome.summary()
    assert "Traceback" not in outcome.stderr and "Warning" not in outcome.stderr, what
    if case.command == "plot":
        assert outcome.code != 0 or (folder / "out" / "plot.png").is_file(), what
        return
    data = _strict_json(outcome.stdout) if outcome.stdout.strip() else None
    if outcome.code == 1:
        assert case.says is None or case.says.lower() in (outcome.stdout + outcome.stderr).lower(), f"exit 1 without {case.says!r} {what}"
        return
    assert data is not None, f"exit 0 without a JSON answer {what}"
    if case.check is not None:
        case.check(data)


CLI_WARNING_FILTERS = [("default", Warning), ("ignore", DeprecationWarning), ("ignore", PendingDeprecationWarning),
                       ("ignore", ImportWarning), ("ignore", ResourceWarning)]
"""Python's default warning filters: what the command line would print on stderr (a numpy RuntimeWarning is),
which an in-process run records and appends to its stderr."""


ALL_UNBOUNDED_IN_SUBPROCESSES = "OPTFLEET_HOSTILE_UNBOUNDED_IN_SUBPROCESSES"
"""Set, every case of the unbounded class runs in a subprocess with its timeout: for measuring a tree where those
cases may still hang (the counts before and after of the issue's closing note)."""


def run_case(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    path = materialize(case, tmp_path)
    if case.unreadable is not None:  # chmod 000, and opening it refused as such (root reads any file); in this process only
        (tmp_path / case.unreadable).chmod(0)
        _refuse_opening(tmp_path / case.unreadable, monkeypatch)
    argv = argv_of(case, path, tmp_path)
    try:
        if case.sub or (os.environ.get(ALL_UNBOUNDED_IN_SUBPROCESSES) and case.cls == UNBOUNDED):
            monkeypatch.setattr(first, "SUBPROCESS_TIMEOUT_S", case.timeout_s)
            return run_subprocess(argv, tmp_path)
        with warnings.catch_warnings(record=True) as shown:
            for action, category in CLI_WARNING_FILTERS:
                warnings.simplefilter(action, category)
            outcome = run_in_process(argv, capsys)
        outcome.stderr += "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in shown)
        return outcome
    finally:
        if case.unreadable is not None:
            (tmp_path / case.unreadable).chmod(0o644)


def test_case_count() -> None:
    """At least 150 cases, over every newer kind and command, every class of the issue."""
    assert len(CASES) >= 150, len(CASES)
    assert {c.kind for c in CASES} >= {"reserved", "routing", "placement", "file"}
    assert {c.command for c in CASES} >= {"solve", "gap", "validate", "simulate", "sweep", "plot", "compress"}
    assert {c.cls for c in CASES} == set(CLASSES)


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_hostile_input(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                       record_property: Callable[[str, object], None]) -> None:
    outcome = run_case(case, tmp_path, capsys, monkeypatch)
    record_property("outcome", outcome.summary())
    record_property("class", case.cls)
    allowed = case.exit if isinstance(case.exit, tuple) else (case.exit,)
    assert outcome.code in allowed, f"expected exit {' or '.join(map(str, allowed))} {outcome.summary()}"
    if outcome.code == 2:
        assert_bad_input(case, outcome, tmp_path / "out")  # type: ignore[arg-type]
    else:
        assert_answer(case, outcome, tmp_path)


# ---------------------------------------------------------------------------------------------------------------
# Fuzzing every schema: loading either succeeds or raises InputError, never anything else, never hangs
# ---------------------------------------------------------------------------------------------------------------

FUZZ_BASES: dict[str, dict[str, Any]] = {
    "reserved": {**BASE["reserved"], "trace": {"file": str(INSTANCES / "reserved" / "tiny.csv"), "time_unit": "s"}},
    "reserved_synthetic": {**BASE["reserved"], "trace": {"synthetic": SYNTHETIC},
                           "plans": {"percentiles": [0.9], "robust": {"split_s": 600}, "backlog": {"max_wait_s": 1}}},
    "routing": {**BASE["routing"], "stream": {"requests": 200, "seed": 1}},
    "placement": BASE["placement"],
}


first.FUZZ_BASES.update(FUZZ_BASES)  # the first corpus's mutated_documents draws from these bases too


COMPRESS_OPTIONS = {"budget_tokens": st.one_of(st.integers(), st.floats(), st.booleans(), st.none(), st.text(max_size=4)),
                    "output_tokens": st.one_of(st.integers(min_value=-5, max_value=2**70), st.floats(), st.none()),
                    "category": st.one_of(st.sampled_from(["prose", "rag", "cjk", "code", "mixed"]), st.text(max_size=6)),
                    "method": st.sampled_from(["greedy", "exact", "magic"]),
                    "time_limit_s": st.one_of(st.floats(), st.none(), st.just(1e-9))}


def _compress_never_crashes(text: str, options: dict[str, Any]) -> None:
    from optfleet.compress import compress
    from optfleet.errors import InputError

    try:
        compress(text, **options)
    except InputError:
        pass


@pytest.mark.parametrize("base_name", list(FUZZ_BASES))
@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzz_newer_schemas_load_raises_only_input_error(base_name: str, data: st.DataObject) -> None:
    _load_never_crashes(data.draw(first.mutated_documents(base_name)))


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(text=st.text(max_size=400) | st.sampled_from([PROSE, PROSE[:200] + "\x00" + PROSE[200:]]), options=st.fixed_dictionaries(COMPRESS_OPTIONS))
def test_fuzz_compress_options_raise_only_input_error(text: str, options: dict[str, Any]) -> None:
    _compress_never_crashes(text, options)


@pytest.mark.slow
@pytest.mark.parametrize("base_name", list(FUZZ_BASES))
@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzz_newer_schemas_load_raises_only_input_error_slow(base_name: str, data: st.DataObject) -> None:
    _load_never_crashes(data.draw(first.mutated_documents(base_name)))


@pytest.mark.slow
@settings(max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=st.text(max_size=2000) | st.sampled_from([PROSE]), options=st.fixed_dictionaries(COMPRESS_OPTIONS))
def test_fuzz_compress_options_raise_only_input_error_slow(text: str, options: dict[str, Any]) -> None:
    _compress_never_crashes(text, options)
