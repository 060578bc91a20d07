"""Published profiles as engines (source: profile): DistServe's closed forms and Splitwise's measured runs.

The files here are written in each project's format with numbers of our own: a DistServe profile is checked
against its closed forms by hand, a Splitwise table built from a known AffineStep must give it back, and every
refusal names its field.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.cli import main
from optfleet.engine.published_profiles import DistServeProfile, profile_engine
from optfleet.engine.step import AffineStep
from optfleet.errors import EXIT_BAD_INPUT, InputError
from optfleet.instance import load_instance
from optfleet.problems.fleet import evaluate
from optfleet.problems.fleet.heuristics import sweep
from optfleet.problems.fleet.problem import prepare

pytestmark = pytest.mark.unit

FIELD, TP_FIELD = "hardware.performance", "hardware.tp"
FORMS = {
    "decoding_large_small_bs_threshold": 64,
    "prefill": [20.0, 0.1, 1e-5],
    "decoding_smallbs": [15.0, 5e-4, 0.05],
    "decoding_largebs": [10.0, 4e-4, 0.15],
}
PROFILE = {"example/model-a": {"1": FORMS, "2": {**FORMS, "prefill": [15.0, 0.06, 3e-6]}},
           "example/model-b": {"2": FORMS}}


def _distserve(tmp_path: Path, document: object = PROFILE) -> Path:
    path = tmp_path / "profiler-example.json"
    path.write_text(json.dumps(document))
    return path


def _engine(tmp_path: Path, model: str | None = "example/model-a", tp: int = 1) -> DistServeProfile:
    engine = profile_engine(_distserve(tmp_path), model, None, tp, FIELD, TP_FIELD)
    assert isinstance(engine, DistServeProfile)
    return engine


def test_distserve_prefill_and_decode_iterations_are_its_closed_forms(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    # a prefill of 1,000 tokens: 20 + 0.1 x 1000 + 1e-5 x 1000^2 = 130 ms
    assert engine.prefill_ms(1000) == pytest.approx(130.0)
    # a decode of 10 sequences reading 5,000 tokens (below the threshold): 15 + 5e-4 x (5000 + 10) + 0.05 x 10
    assert engine.decode_ms(10, 500) == pytest.approx(15.0 + 5e-4 * 5010 + 0.5)
    # 64 sequences (at the threshold): the large-batch form
    assert engine.decode_ms(64, 100) == pytest.approx(10.0 + 4e-4 * (6400 + 64) + 0.15 * 64)
    # a mixed iteration: both works, the larger intercept once
    assert engine.step_ms(1000, 10, 5000) == pytest.approx(130.0 + 5e-4 * 5010 + 0.5)
    # the TP degree picks its own forms
    assert _engine(tmp_path, tp=2).prefill_ms(1000) == pytest.approx(15.0 + 60.0 + 3.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4096), min_size=1, max_size=6))
def test_a_prompt_prefilled_in_chunks_pays_the_whole_prompts_square(chunks: list[int]) -> None:
    # the chunk law c (2 pairs(p, o) - p) sums over a prompt's chunks to c P^2, DistServe's term for the prompt
    engine = DistServeProfile((0.0, 0.0, 1e-5), (1.0, 0.0, 0.0), (1.0, 0.0, 0.0), 64.0, "test")
    offsets = np.cumsum([0, *chunks[:-1]])
    total = sum(float(engine.step_ms(p, 0, 0, o)) for p, o in zip(chunks, offsets))
    assert total == pytest.approx(1e-5 * sum(chunks) ** 2, rel=1e-9)


def test_the_only_model_of_a_file_needs_no_name(tmp_path: Path) -> None:
    engine = profile_engine(_distserve(tmp_path, {"m": {"4": FORMS}}), None, None, 4, FIELD, TP_FIELD)
    assert engine.source == "profile: DistServe profiler-example.json: m TP 4"


@pytest.mark.parametrize(("document", "model", "tp", "field", "says"), [
    (PROFILE, "example/model-c", 1, "hardware.performance.profile_model", "no 'example/model-c'.*example/model-a, example/model-b"),
    (PROFILE, None, 1, "hardware.performance.profile_model", "several models: name one"),
    (PROFILE, "example/model-b", 1, "hardware.tp", "profiles example/model-b at TP 2, not at TP 1"),
    ({"m": {"1": {**FORMS, "prefill": [1.0, -0.1, 0.0]}}}, None, 1, "hardware.performance.file", "prefill must be"),
    ({"m": {"1": {**FORMS, "decoding_smallbs": [1.0, 2.0]}}}, None, 1, "hardware.performance.file", "decoding_smallbs must be"),
    ({"m": {"1": {**FORMS, "decoding_large_small_bs_threshold": "many"}}}, None, 1, "hardware.performance.file", "threshold"),
    ([1, 2], None, 1, "hardware.performance.file", "JSON objects"),
    ({"m": [1, 2]}, None, 1, "hardware.performance.file", "must map TP degrees to forms"),  # said "at TP none"
    ({"m": {"1": {**FORMS, "decoding_largebs": [0.0, 0.0, 0.0]}}}, None, 1, "hardware.performance.file", "fixed cost a = 0 ms"),
])
def test_a_bad_distserve_profile_names_the_field(tmp_path: Path, document: object, model: str | None, tp: int, field: str,
                                                 says: str) -> None:
    with pytest.raises(InputError, match=says) as error:
        profile_engine(_distserve(tmp_path, document), model, None, tp, FIELD, TP_FIELD)
    assert error.value.field == field


TRUTH = AffineStep(8.0, 0.05, 2e-5, 0.03, 2e-6, label="truth")


def _splitwise_rows(model: str, hardware: str, tp: int, step: AffineStep) -> list[dict[str, object]]:
    """Runs as Splitwise measures them, timed by ``step``: a batch prefill, then the mean decode iteration."""
    rows = []
    for prompt, batch, output in [(128, 1, 64), (512, 1, 128), (2048, 1, 128), (8192, 1, 32), (512, 4, 128),
                                  (512, 16, 128), (512, 64, 256)]:
        pairs = batch * prompt * (prompt + 1) / 2
        prompt_ms = step.base_ms + step.per_prefill_token_ms * batch * prompt + step.per_prefill_pair_ms * pairs
        token_ms = float(step.decode_ms(batch, prompt + output / 2))
        rows.append({"model": model, "hardware": hardware, "prompt_size": prompt, "batch_size": batch, "token_size": output,
                     "peak_power": 1.0, "average_power": 0.7, "prompt_time": prompt_ms, "token_time": token_ms,
                     "e2e_time": prompt_ms + (output - 1) * token_ms, "tensor_parallel": tp})
    return rows


def _splitwise(tmp_path: Path, rows: list[dict[str, object]]) -> Path:
    path = tmp_path / "perf_model.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_splitwise_runs_give_back_the_step_that_timed_them(tmp_path: Path) -> None:
    other = AffineStep(30.0, 0.5, 1e-4, 0.3, 1e-5, label="other")
    path = _splitwise(tmp_path, _splitwise_rows("llama2-70b", "a100-80gb", 2, TRUTH) + _splitwise_rows("llama2-70b", "h100-80gb", 2, other)
                      + _splitwise_rows("llama2-70b", "a100-80gb", 4, other) + _splitwise_rows("bloom-176b", "a100-80gb", 2, other))
    step = profile_engine(path, "llama2-70b", "a100-80gb", 2, FIELD, TP_FIELD)
    assert isinstance(step, AffineStep)
    np.testing.assert_allclose(list(step.coefficients().values()), list(TRUTH.coefficients().values()), rtol=1e-6)
    assert step.source.startswith("fit: Splitwise perf_model.csv: llama2-70b on a100-80gb TP 2 (14 points")


@pytest.mark.parametrize(("model", "hardware", "tp", "field", "says"), [
    ("llama2-70b", "a100-80gb", 8, "hardware.tp", "measures llama2-70b on a100-80gb at TP 2, 4, not at TP 8"),
    ("llama2-70b", None, 2, "hardware.performance.profile_hardware", "several hardware for llama2-70b"),
    ("llama2-13b", "a100-80gb", 2, "hardware.performance.profile_model", "no 'llama2-13b'"),
])
def test_a_splitwise_selection_that_matches_no_rows_names_the_field(tmp_path: Path, model: str, hardware: str | None, tp: int,
                                                                    field: str, says: str) -> None:
    path = _splitwise(tmp_path, _splitwise_rows("llama2-70b", "a100-80gb", 2, TRUTH) + _splitwise_rows("llama2-70b", "h100-80gb", 2, TRUTH)
                      + _splitwise_rows("llama2-70b", "a100-80gb", 4, TRUTH))
    with pytest.raises(InputError, match=says) as error:
        profile_engine(path, model, hardware, tp, FIELD, TP_FIELD)
    assert error.value.field == field


def test_a_splitwise_table_without_its_columns_or_with_a_bad_time_is_refused(tmp_path: Path) -> None:
    rows = _splitwise_rows("m", "g", 1, TRUTH)
    with pytest.raises(InputError, match="missing column 'token_time'"):
        profile_engine(_splitwise(tmp_path, [{k: v for k, v in row.items() if k != "token_time"} for row in rows]), None, None, 1,
                       FIELD, TP_FIELD)
    rows[3]["prompt_time"] = -1.0
    with pytest.raises(InputError, match="prompt_time") as error:
        profile_engine(_splitwise(tmp_path, rows), None, None, 1, FIELD, TP_FIELD)
    assert error.value.field.startswith("hardware.performance.file")


ONE_SIZE = {
    "kind": "fleet", "name": "one-size",
    "workload": {"rate_rps": 10, "lengths": {"cdf": [[1099, 0.0], [1100, 1.0]]},
                 "split": {"rule": "fixed_output_fraction", "output_fraction": 1 / 11}},
    "hardware": {"gpu": "A100-80GB", "model": "Llama-3-8B", "iteration": {"chunk_tokens": 500}, "slots": {"table": {2000: 4}}},
    "pools": {"long_window_tokens": 2000},
    "compression": {"enabled": False},
    "slo": {"ttft_p99_ms": 1000},
}


def test_a_fleet_plans_on_a_distserve_profile(tmp_path: Path) -> None:
    path = _distserve(tmp_path)
    problem = prepare(load_instance(ONE_SIZE, hardware__performance={"source": "profile", "file": str(path),
                                                                    "profile_model": "example/model-a"}))
    step = problem.pool(2000).step
    assert step.source.startswith("profile: DistServe profiler-example.json: example/model-a TP 1")
    # a decode step of the pool's 4 sequences at a 1,000-token context, as the reduction reads the profile
    assert float(step.decode_ms(4, 1000)) == pytest.approx(15.0 + 5e-4 * 4004 + 0.2, rel=0.1)
    plan = sweep(problem).plan
    assert evaluate(problem, plan).meets_slo


@pytest.mark.parametrize(("performance", "field", "says"), [
    ({"source": "profile"}, "hardware.performance", "source profile needs file"),
    ({"source": "profile", "file": ["a.json", "b.json"]}, "hardware.performance", "source profile needs file"),
    ({"source": "fit", "file": "a.csv", "profile_model": "m"}, "hardware.performance", "profile_model do not apply to source fit"),
    ({"source": "profile", "file": "a.json", "fixed": {"base_ms": 1.0}}, "hardware.performance", "fixed do not apply to source profile"),
])
def test_profile_fields_belong_to_source_profile(performance: dict[str, object], field: str, says: str) -> None:
    with pytest.raises(InputError, match=says) as error:
        prepare(load_instance(ONE_SIZE, hardware__performance=performance))
    assert error.value.field == field


def test_the_cli_refuses_a_missing_tp_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = {**ONE_SIZE, "hardware": {**ONE_SIZE["hardware"], "tp": 4,
                                         "performance": {"source": "profile", "file": str(_distserve(tmp_path)),
                                                         "profile_model": "example/model-a"}}}
    instance = tmp_path / "fleet.yaml"
    instance.write_text(json.dumps(document))
    assert main(["solve", str(instance), "--method", "sweep"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "hardware.tp" in err and "at TP 1, 2, not at TP 4" in err


def test_a_ragged_splitwise_row_is_refused_as_a_short_row_not_as_nan(tmp_path: Path) -> None:
    path = _splitwise(tmp_path, _splitwise_rows("m", "g", 1, TRUTH))
    path.write_text(path.read_text() + "m,g,512,1\n")
    with pytest.raises(InputError, match="row shorter than the header") as error:
        profile_engine(path, None, None, 1, FIELD, TP_FIELD)
    assert error.value.field.startswith("hardware.performance.file") and "'nan'" not in str(error.value)
