"""Fitting the affine engine to the user's measurements: iteration tables and serving-benchmark results files.

Sample files of each format are built here from a known AffineStep through the observation model, stated again
in closed form for equal lengths (``_itl_ms``, ``_ttft_ms``), so each reader and the fit must recover it; two small
engine simulations check that model against the iterations it summarises.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.cli import main
from optfleet.engine.benchmark_files import (Observation, itl_multipliers, read_performance_file,
                                             read_performance_files)
from optfleet.engine.fit import fit_affine_step, fit_performance_files
from optfleet.engine.step import AffineStep, prefill_pairs
from optfleet.errors import EXIT_BAD_INPUT, InputError

from support import FLEET_INSTANCES

pytestmark = pytest.mark.unit

TRUTH = AffineStep(6.0, 0.02, 4.4e-5, 0.027, 9e-7, label="truth")
C = np.array(list(TRUTH.coefficients().values()))
FIELD = "hardware.performance.file"


def _coefficients(step: AffineStep) -> np.ndarray:
    return np.array(list(step.coefficients().values()))


# ------------------------------------------------------------------------------------------ iteration tables


def _iteration_rows(count: int, seed: int = 0) -> np.ndarray:
    """A well-spread design: columns p, o, b, k (half the rows prefill, every row decodes something or prefills)."""
    rng = np.random.default_rng(seed)
    p = np.where(np.arange(count) % 2 == 1, rng.integers(16, 4096, count), 0)
    o = np.where(p > 0, rng.integers(0, 8192, count), 0)
    b = rng.integers(0, 256, count)
    b[p == 0] = np.maximum(b[p == 0], 1)
    k = b * rng.integers(64, 8192, count)
    return np.column_stack([p, o, b, k]).astype(float)


def _multipliers(rows: np.ndarray) -> np.ndarray:
    p, o, b, k = rows.T
    return np.column_stack([np.ones(len(rows)), b, k, p, prefill_pairs(p, o)])


def _write_table(path: Path, rows: np.ndarray, times: np.ndarray, context: str = "total") -> Path:
    """An iteration table with the decodes' context as a total (decode_kv_tokens) or a mean (decode_context_tokens)."""
    p, o, b, k = rows.T
    if context == "total":
        kv_name, kv = "decode_kv_tokens", k
    else:
        kv_name, kv = "decode_context_tokens", np.divide(k, b, out=np.zeros_like(k), where=b > 0)
    lines = [f"prefill_tokens,prefill_offset_tokens,decode_seqs,{kv_name},time_ms"]
    lines += [f"{a:g},{c:g},{d:g},{float(e)!r},{float(t)!r}" for a, c, d, e, t in zip(p, o, b, kv, times)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _table(tmp_path: Path, count: int = 24, noise: float = 0.0, seed: int = 0, name: str = "iterations.csv") -> Path:
    rows = _iteration_rows(count, seed)
    times = _multipliers(rows) @ C * (1 + noise * np.random.default_rng(seed + 1).standard_normal(count))
    return _write_table(tmp_path / name, rows, times)


def test_exact_iterations_recover_the_coefficients(tmp_path: Path) -> None:
    result = fit_performance_files([_table(tmp_path)])
    np.testing.assert_allclose(_coefficients(result.step), C, rtol=1e-6)
    assert result.max_error < 1e-9 and result.step.max_error == result.max_error
    assert result.step.label == "fit: iterations.csv (24 points, RMS error 0.0 %, max 0.0 %)"
    assert result.step.source == result.step.label


def test_noisy_iterations_recover_the_coefficients_within_the_noise(tmp_path: Path) -> None:
    result = fit_performance_files([_table(tmp_path, count=200, noise=0.01, seed=3)])
    np.testing.assert_allclose(_coefficients(result.step), C, rtol=0.05)
    assert 0.007 < result.rms_error < 0.013, "the residuals are the 1 % noise"
    assert result.max_error == pytest.approx(np.max(np.abs(result.relative_errors)))
    np.testing.assert_allclose(result.residuals_ms, result.relative_errors * [o.time_ms for o in result.observations])


def test_context_as_a_mean_per_sequence_reads_as_the_total(tmp_path: Path) -> None:
    rows = _iteration_rows(12)
    times = _multipliers(rows) @ C
    total = read_performance_file(_write_table(tmp_path / "total.csv", rows, times), FIELD)
    mean = read_performance_file(_write_table(tmp_path / "mean.csv", rows, times, context="mean"), FIELD)
    np.testing.assert_allclose([o.multipliers for o in mean], [o.multipliers for o in total], rtol=1e-12)


def test_the_offset_column_is_optional(tmp_path: Path) -> None:
    path = tmp_path / "no_offset.csv"
    path.write_text("prefill_tokens,decode_seqs,decode_kv_tokens,time_ms\n512,4,4096,30.5\n")
    (obs,) = read_performance_file(path, FIELD)
    assert obs.multipliers == (1.0, 4.0, 4096.0, 512.0, 512 * 513 / 2)
    assert (obs.field, obs.source, obs.what) == (FIELD, "no_offset.csv", "row 1")


def test_parquet_reads_as_csv(tmp_path: Path) -> None:
    import pandas as pd

    csv = _table(tmp_path)
    parquet = tmp_path / "iterations.parquet"
    pd.read_csv(csv).to_parquet(parquet)
    from_parquet, from_csv = read_performance_file(parquet, FIELD), read_performance_file(csv, FIELD)
    assert [o.multipliers for o in from_parquet] == [o.multipliers for o in from_csv]


def test_parquet_without_pyarrow_says_which_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parquet = tmp_path / "iterations.parquet"
    parquet.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(InputError, match=r"optfleet\[parquet\]") as caught:
        read_performance_file(parquet, FIELD)
    assert caught.value.field == FIELD


def test_the_shipped_synthetic_example_says_so_and_recovers_its_coefficients() -> None:
    path = FLEET_INSTANCES / "data" / "iterations_synthetic_example.csv"
    assert path.read_text().startswith("# SYNTHETIC example, not a measurement")
    result = fit_performance_files([path])
    np.testing.assert_allclose(_coefficients(result.step), C, rtol=0.03)
    assert result.rms_error < 0.015


# A fixed, well-spread design for the property tests, and each column's scale (a time / its largest multiplier).
DESIGN = _multipliers(_iteration_rows(40, seed=11))
COEFFICIENTS = st.tuples(st.floats(0.5, 50.0), st.floats(0.0, 0.1), st.floats(0.0, 1e-4), st.floats(0.0, 0.1),
                         st.floats(0.0, 1e-5))


def _observations(times: np.ndarray) -> list[Observation]:
    return [Observation(tuple(row), float(t), FIELD, "design", f"row {i + 1}") for i, (row, t) in enumerate(zip(DESIGN, times))]


@settings(max_examples=60, deadline=None)
@given(COEFFICIENTS)
def test_exact_data_recover_any_non_negative_coefficients(coefficients: tuple[float, ...]) -> None:
    truth = np.array(coefficients)
    times = DESIGN @ truth
    fitted = _coefficients(fit_affine_step(_observations(times)).step)
    scale = times.max() / DESIGN.max(axis=0)
    assert np.all(np.abs(fitted - truth) <= 1e-6 * truth + 1e-9 * scale), (fitted, truth)


@settings(max_examples=30, deadline=None)
@given(COEFFICIENTS, st.integers(0, 2**32 - 1))
def test_noisy_data_give_an_engine_within_the_noise(coefficients: tuple[float, ...], seed: int) -> None:
    truth = np.array(coefficients)
    times = DESIGN @ truth * (1 + 0.01 * np.random.default_rng(seed).standard_normal(len(DESIGN)))
    result = fit_affine_step(_observations(times))
    error = DESIGN @ _coefficients(result.step) / (DESIGN @ truth) - 1
    assert np.sqrt(np.mean(error**2)) < 0.01, "fitting 5 coefficients to 40 points leaves ~sqrt(5/40) of the 1 % noise"


# ------------------------------------------------------------------------------------------ serving benchmarks


def _itl_ms(others: float, prompt: float, output: float) -> float:
    """The mean ITL of runs of equal lengths: the decode of the tagged request at mean context I + O/2, and m others
    each decoding with probability (O - 1)/O or prefilling its prompt with probability 1/O."""
    decoding, context = (output - 1) / output, prompt + output / 2
    return (TRUTH.base_ms + TRUTH.per_seq_ms * (1 + others * decoding) + TRUTH.per_kv_token_ms * context * (1 + others * decoding)
            + others / output * float(TRUTH.prefill_compute_ms(prompt)))


def _ttft_ms(prompt: float) -> float:
    """One iteration that prefills the prompt on an idle engine."""
    return TRUTH.base_ms + float(TRUTH.prefill_compute_ms(prompt))


# (closed-loop concurrency N, or None for an open loop at mean concurrency 12; prompt I; output O)
RUNS = [(1, 512, 128), (1, 2048, 256), (8, 1024, 128), (32, 256, 512), (64, 4096, 64), (None, 768, 200)]
OPEN_IN_FLIGHT = 12.0
OPEN_RATE_RPS = 4.0


def _run_times(concurrency: int | None, prompt: float, output: float) -> dict[str, float]:
    """ITL, TTFT (a queueing one above concurrency 1, which the fit must leave out), end-to-end latency and
    throughput of a run, consistent with Little's law."""
    others = OPEN_IN_FLIGHT if concurrency is None else concurrency - 1
    itl = _itl_ms(others, prompt, output)
    ttft = _ttft_ms(prompt) * (1 if concurrency == 1 else 1.7)
    e2e = OPEN_IN_FLIGHT / OPEN_RATE_RPS * 1000 if concurrency is None else ttft + (output - 1) * itl
    throughput = OPEN_RATE_RPS if concurrency is None else concurrency / e2e * 1000
    return {"itl": itl, "ttft": ttft, "e2e": e2e, "throughput": throughput}


def _vllm_result(concurrency: int | None, prompt: float, output: float, completed: int = 200) -> dict[str, Any]:
    """A ``vllm bench serve --save-result`` file's keys (vllm/benchmarks/serve.py), default percentile metrics
    (ttft, tpot, itl) plus e2el."""
    times = _run_times(concurrency, prompt, output)
    result: dict[str, Any] = {
        "date": "20250601-120000", "endpoint_type": "openai", "backend": "openai", "label": None,
        "model_id": "meta-llama/Llama-3.1-8B-Instruct", "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct",
        "num_prompts": completed, "request_rate": "inf" if concurrency else OPEN_RATE_RPS, "burstiness": 1.0,
        "max_concurrency": concurrency, "duration": completed / times["throughput"], "completed": completed,
        "failed": 0, "total_input_tokens": int(prompt * completed), "total_output_tokens": int(output * completed),
        "request_throughput": times["throughput"], "request_goodput": None,
        "output_throughput": times["throughput"] * output, "total_token_throughput": times["throughput"] * (prompt + output),
        "max_output_tokens_per_s": times["throughput"] * output * 1.1, "max_concurrent_requests": concurrency or 20,
    }
    for metric, value in (("ttft", times["ttft"]), ("tpot", times["itl"]), ("itl", times["itl"]), ("e2el", times["e2e"])):
        result |= {f"mean_{metric}_ms": value, f"median_{metric}_ms": value, f"std_{metric}_ms": 0.0, f"p99_{metric}_ms": value * 1.2}
    return result


def _aiperf_stat(value: float, unit: str) -> dict[str, Any]:
    return {"unit": unit, "avg": value, "p50": value, "p90": value * 1.1, "p99": value * 1.2, "min": value * 0.9,
            "max": value * 1.3, "std": value * 0.05}


def _aiperf_export(concurrency: int | None, prompt: float, output: float) -> dict[str, Any]:
    """A ``profile_export_aiperf.json`` (aiperf/exporters/metrics_json_exporter.py): metric tags with unit and
    avg/percentiles, and the user's input_config (unset settings left out)."""
    times = _run_times(concurrency, prompt, output)
    loadgen = {"concurrency": concurrency} if concurrency else {"request_rate": OPEN_RATE_RPS}
    return {
        "schema_version": "1.0", "aiperf_version": "0.5.0", "benchmark_id": "5f0c1d2e",
        "request_throughput": _aiperf_stat(times["throughput"], "requests/sec"),
        "request_latency": _aiperf_stat(times["e2e"], "ms"), "request_count": _aiperf_stat(200, "requests"),
        "time_to_first_token": _aiperf_stat(times["ttft"], "ms"), "inter_token_latency": _aiperf_stat(times["itl"], "ms"),
        "output_token_throughput": _aiperf_stat(times["throughput"] * output, "tokens/sec"),
        "output_sequence_length": _aiperf_stat(output, "tokens"), "input_sequence_length": _aiperf_stat(prompt, "tokens"),
        "input_config": {"endpoint": {"model_names": ["meta-llama/Llama-3.1-8B-Instruct"], "type": "chat", "streaming": True},
                         "loadgen": loadgen},
        "was_cancelled": False, "error_summary": [], "start_time": "2025-06-01T12:00:00", "end_time": "2025-06-01T12:05:00",
    }


def _distribution(value: float) -> dict[str, Any]:
    """A GuideLLM StatusDistributionSummary (guidellm/schemas/statistics.py) of a constant value."""
    percentiles = {key: value for key in ("p001", "p01", "p05", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "p999")}
    summary = {"mean": value, "median": value, "mode": value, "variance": 0.0, "std_dev": 0.0, "min": value,
               "max": value, "count": 100, "total_sum": 100 * value, "percentiles": percentiles}
    empty = {**summary, "mean": 0.0, "count": 0, "total_sum": 0.0}
    return {"successful": summary, "incomplete": empty, "errored": empty, "total": summary}


def _guidellm_benchmark(concurrency: int | None, prompt: float, output: float, config: str = "config") -> dict[str, Any]:
    """One GuideLLM benchmark (guidellm/benchmark/schemas/generative): its strategy and metrics."""
    times = _run_times(concurrency, prompt, output)
    strategy = ({"type_": "synchronous"} if concurrency == 1 else {"type_": "concurrent", "streams": concurrency}
                if concurrency else {"type_": "poisson", "rate": OPEN_RATE_RPS, "random_seed": 42})
    metrics = {"request_concurrency": OPEN_IN_FLIGHT if concurrency is None else concurrency,
               "requests_per_second": times["throughput"], "request_latency": times["e2e"] / 1000,
               "prompt_token_count": prompt, "output_token_count": output, "time_to_first_token_ms": times["ttft"],
               "inter_token_latency_ms": times["itl"], "time_per_output_token_ms": times["itl"]}
    return {"type_": "generative_benchmark", config: {"strategy": strategy, "run_index": 0},
            "metrics": {"request_totals": {"successful": 100, "incomplete": 0, "errored": 0, "total": 100},
                        **{name: _distribution(value) for name, value in metrics.items()}}}


def _write_json(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document))
    return path


def _fit_recovers(paths: list[Path]) -> None:
    result = fit_performance_files(paths)
    np.testing.assert_allclose(_coefficients(result.step), C, rtol=1e-6)
    itls, ttfts = (sum(o.what.endswith(kind) for o in result.observations) for kind in ("mean ITL", "mean TTFT"))
    assert (itls, ttfts) == (len(RUNS), 2), "every run gives its ITL, the two runs at concurrency 1 their TTFT"


def test_vllm_results_recover_the_coefficients(tmp_path: Path) -> None:
    _fit_recovers([_write_json(tmp_path / f"vllm_{i}.json", _vllm_result(*run)) for i, run in enumerate(RUNS)])


def test_aiperf_exports_recover_the_coefficients(tmp_path: Path) -> None:
    paths = []
    for i, run in enumerate(RUNS):
        (tmp_path / f"run{i}").mkdir()
        paths.append(_write_json(tmp_path / f"run{i}" / "profile_export_aiperf.json", _aiperf_export(*run)))
    _fit_recovers(paths)


def test_a_guidellm_report_recovers_the_coefficients(tmp_path: Path) -> None:
    report = {"metadata": {"version": 1}, "args": {"profile": "concurrent"},
              "benchmarks": [_guidellm_benchmark(*run) for run in RUNS]}
    _fit_recovers([_write_json(tmp_path / "benchmarks.json", report)])


def test_older_guidellm_reports_name_the_strategy_under_args(tmp_path: Path) -> None:
    path = _write_json(tmp_path / "old.json", {"benchmarks": [_guidellm_benchmark(1, 512, 128, config="args")]})
    assert [o.what for o in read_performance_file(path, FIELD)] == ["benchmarks[0] mean ITL", "benchmarks[0] mean TTFT"]


def test_vllm_appended_results_hold_one_run_per_line(tmp_path: Path) -> None:
    path = tmp_path / "appended.jsonl"
    path.write_text("\n".join(json.dumps(_vllm_result(*run)) for run in RUNS[:3]))
    observations = read_performance_file(path, FIELD)
    assert [o.what for o in observations] == ["line 1 mean ITL", "line 1 mean TTFT", "line 2 mean ITL", "line 2 mean TTFT",
                                              "line 3 mean ITL"]


def test_vllm_detailed_lengths_weigh_each_request(tmp_path: Path) -> None:
    """With --save-detailed the per-request lengths give the sums S_O, S_g, S_k, S_p, S_q exactly; a failed
    request (output 0) is left out."""
    rng = np.random.default_rng(5)
    prompt, output = rng.integers(100, 3000, 50).astype(float), rng.integers(2, 300, 50).astype(float)
    others = 15
    slots, gaps = output.sum(), (output - 1).sum()
    kv = ((output - 1) * (prompt + output / 2)).sum()
    expected = (1, 1 + others * gaps / slots, kv / gaps + others * kv / slots, others * prompt.sum() / slots,
                others * (prompt * (prompt + 1) / 2).sum() / slots)
    result = _vllm_result(others + 1, 1000, 100) | {"input_lens": [*prompt, 999], "output_lens": [*output, 0]}
    (itl,) = read_performance_file(_write_json(tmp_path / "detailed.json", result), FIELD)
    np.testing.assert_allclose(itl.multipliers, expected, rtol=1e-12)


def test_iterations_and_benchmarks_fit_together(tmp_path: Path) -> None:
    paths = [_table(tmp_path, count=6), _write_json(tmp_path / "vllm.json", _vllm_result(*RUNS[2])),
             _write_json(tmp_path / "aiperf.json", _aiperf_export(*RUNS[0]))]
    result = fit_performance_files(paths)
    np.testing.assert_allclose(_coefficients(result.step), C, rtol=1e-6)
    assert result.step.label.startswith("fit: iterations.csv + 2 more (9 points, ")
    assert {o.field for o in result.observations} == {f"{FIELD}[0]", f"{FIELD}[1]", f"{FIELD}[2]"}


def test_aiperf_without_a_load_setting_uses_littles_law(tmp_path: Path) -> None:
    """An export that names neither concurrency nor request rate (both left at their defaults) is a closed loop at
    throughput x latency in flight, without a TTFT."""
    export = _aiperf_export(8, 1024, 128)
    del export["input_config"]["loadgen"]
    (itl,) = read_performance_file(_write_json(tmp_path / "default.json", export), FIELD)
    assert itl.multipliers == pytest.approx(itl_multipliers([1024], [128], 7))


# The observation model against a simulated engine: iterations of the affine step, one token per decoding request.


def _simulate_closed_loop(clients: int, iterations: int, seed: int) -> tuple[float, np.ndarray, np.ndarray]:
    """Gap-weighted mean ITL of a closed loop of ``clients`` with random lengths, and the lengths it completed."""
    rng = np.random.default_rng(seed)
    draw = lambda n: (rng.integers(200, 3000, n).astype(float), rng.integers(10, 200, n))  # noqa: E731
    prompt, output = draw(clients)
    slot = rng.integers(0, output)
    gap_ms = gaps = 0.0
    done: list[tuple[float, int]] = []
    for _ in range(iterations):
        prefill, decode = slot == 0, slot > 0
        b = decode.sum()
        t = float(TRUTH.step_ms(0, b, (prompt + slot)[decode].sum()) + TRUTH.prefill_compute_ms(prompt[prefill]).sum())
        gap_ms, gaps = gap_ms + b * t, gaps + b
        slot += 1
        for i in np.flatnonzero(slot == output):
            done.append((prompt[i], output[i]))
            new_prompt, new_output = draw(1)
            prompt[i], output[i], slot[i] = new_prompt[0], new_output[0], 0
    lengths = np.array(done)
    return gap_ms / gaps, lengths[:, 0], lengths[:, 1]


@pytest.mark.parametrize(("clients", "seed"), [(1, 0), (6, 1), (40, 2)])
def test_the_itl_model_matches_a_simulated_closed_loop(clients: int, seed: int) -> None:
    simulated, prompt, output = _simulate_closed_loop(clients, 6000, seed)
    assert np.dot(itl_multipliers(prompt, output, clients - 1), C) == pytest.approx(simulated, rel=0.01)


# ------------------------------------------------------------------------------------------------ refusals


def _refusal(call: Any) -> InputError:
    with pytest.raises(InputError) as caught:
        call()
    assert "\n" not in str(caught.value), "one line"
    return caught.value


def _rows_file(tmp_path: Path, text: str, name: str = "bad.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "column", "words"), [
    ("prefill_tokens,decode_seqs,decode_kv_tokens\n0,1,10\n", "'time_ms'", "missing column"),
    ("prefill_tokens,decode_kv_tokens,time_ms\n0,10,5\n", "'decode_seqs'", "missing column"),
    ("prefill_tokens,decode_seqs,time_ms\n0,1,5\n", "decode_kv_tokens", "gives neither"),
    ("prefill_tokens,decode_seqs,decode_kv_tokens,decode_context_tokens,time_ms\n0,1,10,10,5\n", "decode_context_tokens",
     "gives both"),
])
def test_a_missing_column_is_named_with_the_file(tmp_path: Path, text: str, column: str, words: str) -> None:
    path = _rows_file(tmp_path, text)
    error = _refusal(lambda: read_performance_files([path]))
    assert (error.field, error.value) == (f"{FIELD}[0]", str(path))
    assert column in error.problem and words in error.problem


@pytest.mark.parametrize(("time", "problem"), [("0", "> 0"), ("-3.5", "> 0"), ("nan", "finite"), ("fast", "finite")])
def test_a_bad_time_is_named_by_column_and_row(tmp_path: Path, time: str, problem: str) -> None:
    path = _rows_file(tmp_path, f"prefill_tokens,decode_seqs,decode_kv_tokens,time_ms\n0,1,10,5\n0,2,20,{time}\n")
    error = _refusal(lambda: read_performance_files([path]))
    assert error.field == f"{FIELD}[0]:time_ms" and error.value == time
    assert problem in error.problem and f"row 2 of {path}" in error.problem


def test_a_negative_count_is_refused(tmp_path: Path) -> None:
    path = _rows_file(tmp_path, "prefill_tokens,decode_seqs,decode_kv_tokens,time_ms\n-1,1,10,5\n")
    assert _refusal(lambda: read_performance_file(path, FIELD)).field == f"{FIELD}:prefill_tokens"


@pytest.mark.parametrize(("name", "text", "words"), [
    ("empty.csv", "", "empty"),
    ("header.csv", "prefill_tokens,decode_seqs,decode_kv_tokens,time_ms\n", "no rows"),
    ("empty.json", "  \n", "empty"),
    ("broken.json", "{\"completed\": ", "not JSON"),
    ("list.json", "[1, 2]", "JSON objects"),
    ("other.json", "{\"hello\": 1}", "not a vLLM bench serve result"),
    ("table.xlsx", "x", "unknown file type"),
])
def test_empty_unreadable_or_unknown_files_are_refused(tmp_path: Path, name: str, text: str, words: str) -> None:
    path = _rows_file(tmp_path, text, name)
    error = _refusal(lambda: read_performance_files([path]))
    assert (error.field, error.value) == (f"{FIELD}[0]", str(path)) and words in error.problem


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    error = _refusal(lambda: read_performance_files([tmp_path / "nowhere.json"]))
    assert error.field == f"{FIELD}[0]" and "file not found" in error.problem


def test_no_files_is_refused() -> None:
    assert _refusal(lambda: read_performance_files([])).field == FIELD


def _edited(document: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """``document`` with ``value`` at ``path`` (None deletes the key)."""
    node = document
    for key in path[:-1]:
        node = node[key]
    if value is None:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return document


@pytest.mark.parametrize(("document", "words"), [
    (_edited(_vllm_result(None, 512, 128), ("request_rate",), "inf") | {"max_concurrency": None}, "a burst"),
    (_edited(_edited(_vllm_result(4, 512, 128), ("mean_itl_ms",), None), ("mean_tpot_ms",), None), "mean_tpot_ms: missing"),
    (_edited(_vllm_result(4, 512, 128), ("mean_itl_ms",), -2.0), "mean_itl_ms: -2.0 is not a finite number > 0"),
    (_edited(_vllm_result(4, 512, 128), ("completed",), 0), "completed: 0"),
    (_vllm_result(4, 512, 1), "no inter-token latency"),
    (_edited(_aiperf_export(4, 512, 128), ("inter_token_latency", "unit"), "fortnights"), "inter_token_latency.unit: 'fortnights'"),
    (_edited(_aiperf_export(4, 512, 128), ("output_sequence_length",), None), "output_sequence_length.avg: missing"),
    ({"benchmarks": []}, "benchmarks: an empty list"),
    ({"benchmarks": [_edited(_guidellm_benchmark(8, 512, 128), ("config", "strategy", "type_"), "sweep")]},
     "benchmarks[0].config.strategy.type_: unknown strategy 'sweep'"),
    ({"benchmarks": [_edited(_guidellm_benchmark(8, 512, 128), ("metrics", "inter_token_latency_ms"), None)]},
     "benchmarks[0].metrics.inter_token_latency_ms.successful.mean: missing"),
])
def test_a_bad_benchmark_file_names_the_key(tmp_path: Path, document: dict[str, Any], words: str) -> None:
    path = _write_json(tmp_path / "run.json", document)
    error = _refusal(lambda: read_performance_files([path]))
    assert (error.field, error.value) == (f"{FIELD}[0]", str(path))
    assert words in error.problem


def test_too_few_points_are_refused(tmp_path: Path) -> None:
    error = _refusal(lambda: fit_performance_files([_table(tmp_path, count=3)]))
    assert error.field == FIELD and "3 point(s) cannot identify 5 coefficients" in error.problem


def test_one_batch_size_cannot_tell_base_from_per_seq(tmp_path: Path) -> None:
    rows = _iteration_rows(20)
    rows[:, 2] = 32
    path = _write_table(tmp_path / "one_batch.csv", rows, _multipliers(rows) @ C)
    error = _refusal(lambda: fit_performance_files([path]))
    assert error.value == "one_batch.csv"
    assert error.problem.startswith("base_ms and per_seq_ms cannot be told apart") and "decode batch sizes" in error.problem
    assert "fixed={'per_seq_ms': value}" in error.problem


def test_no_prefill_leaves_the_prefill_coefficients_unidentified_unless_pinned(tmp_path: Path) -> None:
    rows = _iteration_rows(20)
    rows[:, :2] = 0
    path = _write_table(tmp_path / "decode_only.csv", rows, _multipliers(rows) @ C)
    error = _refusal(lambda: fit_performance_files([path]))
    assert error.problem.startswith("no point excites per_prefill_token_ms") and "prefill_tokens > 0" in error.problem
    result = fit_performance_files([path], fixed={"per_prefill_token_ms": 0.03, "per_prefill_pair_ms": 0.0})
    np.testing.assert_allclose(_coefficients(result.step), [*C[:3], 0.03, 0.0], rtol=1e-6)
    assert result.step.label.endswith("; per_prefill_token_ms pinned at 0.03; per_prefill_pair_ms pinned at 0)")


def test_one_prompt_length_cannot_tell_prefill_tokens_from_pairs(tmp_path: Path) -> None:
    runs = [(1, 128), (4, 64), (16, 256), (64, 32), (8, 512)]
    paths = [_write_json(tmp_path / f"run{n}.json", _vllm_result(n, 1024, o)) for n, o in runs]
    error = _refusal(lambda: fit_performance_files(paths))
    assert "per_prefill_token_ms and per_prefill_pair_ms cannot be told apart" in error.problem
    assert "prompts of different lengths" in error.problem
    result = fit_performance_files(paths, fixed={"per_prefill_pair_ms": TRUTH.per_prefill_pair_ms})
    np.testing.assert_allclose(_coefficients(result.step), C, rtol=1e-6)


@pytest.mark.parametrize(("fixed", "field", "value"), [
    ({"per_token_ms": 1.0}, f"{FIELD}.fixed", "per_token_ms"),
    ({"per_seq_ms": -1.0}, f"{FIELD}.fixed.per_seq_ms", -1.0),
    ({"base_ms": 0.0}, f"{FIELD}.fixed.base_ms", 0.0),
    ({"per_kv_token_ms": float("nan")}, f"{FIELD}.fixed.per_kv_token_ms", None),
])
def test_bad_pins_are_refused(tmp_path: Path, fixed: dict[str, float], field: str, value: Any) -> None:
    error = _refusal(lambda: fit_performance_files([_table(tmp_path)], fixed=fixed))
    assert error.field == field and (value is None or error.value == value)


def test_a_fit_that_puts_base_at_zero_is_refused() -> None:
    rows = DESIGN[DESIGN[:, 1] > 0]
    times = rows[:, 1] * 0.5 + rows[:, 3] * 0.02 - 0.1  # the unconstrained fit's base would be -0.1
    error = _refusal(lambda: fit_affine_step(_observations_of(rows, times)))
    assert "base_ms at 0" in error.problem


def _observations_of(rows: np.ndarray, times: np.ndarray) -> list[Observation]:
    return [Observation(tuple(r), float(t), FIELD, "direct", f"row {i + 1}") for i, (r, t) in enumerate(zip(rows, times))]


@pytest.mark.parametrize("time", [0.0, -1.0, float("inf")])
def test_the_fit_refuses_a_bad_time_by_the_points_field(time: float) -> None:
    observations = _observations_of(DESIGN[:6], DESIGN[:6] @ C)
    observations[4] = Observation(observations[4].multipliers, time, f"{FIELD}[3]", "mine.csv", "row 5")
    error = _refusal(lambda: fit_affine_step(observations))
    assert (error.field, error.value) == (f"{FIELD}[3]", "mine.csv") and error.problem.startswith("row 5: time")


def test_the_fit_refuses_no_observations() -> None:
    assert _refusal(lambda: fit_affine_step([])).field == FIELD


def test_the_cli_prints_a_refusal_as_one_line_with_exit_code_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Whatever command reads the files, its InputError reaches the user as ``error: <field> = <value>: <problem>``."""
    import optfleet.cli.commands as commands

    path = _rows_file(tmp_path, "prefill_tokens,decode_seqs,decode_kv_tokens\n0,1,10\n")
    monkeypatch.setitem(commands.COMMANDS, "catalog", lambda args: fit_performance_files([path]))
    assert main(["catalog"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"error: {FIELD}[0] = '{path}': missing column 'time_ms'")
