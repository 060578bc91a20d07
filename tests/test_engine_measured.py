"""The measured engine (optfleet/engine/measured.py) against aiconfigurator's own static estimates.

The reference at every point is computed here through aiconfigurator-core's public API (``compile_engine`` and
``EngineHandle``, the same compiled engine its CLI's ``estimate --mode static_ctx|static_gen`` runs): a prefill is
the TTFT of a static batch of one prompt, a decode step the TPOT of a static batch at ``osl = 2`` (one step).  The
engine must match within 2 % at points on and off its grids, over four configurations: three GPU systems, three
models (one MoE), TP 1 to 8, decode batches 1 to 128, prompts of 1k to 16k tokens.
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources

import numpy as np
import pytest

pytest.importorskip("aiconfigurator_core", reason="the measured engine needs the 'measured' extra "
                                                  "(aiconfigurator-core, numpy >= 2.1), installed in its own CI venv")

from aiconfigurator_core.sdk import EngineHandle, compile_engine  # noqa: E402

from optfleet.engine import measured  # noqa: E402
from optfleet.engine.measured import MeasuredEngine, measured_catalog  # noqa: E402
from optfleet.errors import InputError  # noqa: E402

TOLERANCE = 0.02
# The tables of these tests stop at the region checked (a full-size build reaches 128k tokens and 1024 sequences).
LIMITS = {"max_tokens": 16384, "max_batch": 128}
# name -> (system, backend, model, tp, ep, is_moe)
CONFIGS = {
    "llama8b-h100-vllm-tp1": ("h100_sxm", "vllm", "meta-llama/Meta-Llama-3.1-8B", 1, 1, False),
    "llama70b-h200-vllm-tp8": ("h200_sxm", "vllm", "meta-llama/Meta-Llama-3.1-70B", 8, 1, False),
    "qwen32b-a100-vllm-tp2": ("a100_sxm", "vllm", "Qwen/Qwen3-32B", 2, 1, False),
    "qwen30b-a3b-h100-vllm-tp2-ep2": ("h100_sxm", "vllm", "Qwen/Qwen3-30B-A3B", 2, 2, True),
}
# A prompt of L tokens with o cached; b sequences decoding after prompts of I tokens; a chunk of p tokens with b
# decodes at aiconfigurator's mixed-step context p + osl // 2 + 1.  Off-grid: 3000, 10000 - 3333, o = 3333, 8000,
# b = 37 and 100, I = 2999 and 7776, every mixed point's context.
PREFILLS = [(1024, 0), (3000, 0), (16000, 0), (4096, 1024), (10000, 3333), (16384, 8000)]
DECODES = [(1, 1023), (8, 4095), (37, 7776), (64, 2047), (100, 2999), (128, 16000)]
MIXED = [(512, 16, 2), (2048, 100, 1000), (7000, 3, 2000)]


@pytest.fixture(scope="module")
def engines() -> dict[str, tuple[MeasuredEngine, EngineHandle]]:
    """Each configuration's engine (built once, without the disk cache) and aiconfigurator's own handle."""
    built = {}
    for name, (system, backend, model, tp, ep, is_moe) in CONFIGS.items():
        engine = MeasuredEngine.build(system, backend, None, model, tp, ep=ep, cache=False, **LIMITS)
        moe = {"moe_tp_size": tp // ep, "moe_ep_size": ep} if is_moe else {}
        handle = EngineHandle(compile_engine(model, system, backend, tp_size=tp, **moe))
        built[name] = engine, handle
    return built


def static_prefill_ms(handle: EngineHandle, prompt: int, cached: int) -> float:
    """aiconfigurator's static TTFT of one prompt of ``prompt`` tokens, ``cached`` of them in the prefix cache."""
    return handle.run_static(batch_size=1, isl=prompt, osl=1, prefix=cached, mode="static_ctx")[0]


def static_decode_ms(handle: EngineHandle, seqs: int, prompt: int) -> float:
    """aiconfigurator's static TPOT of ``seqs`` sequences after prompts of ``prompt`` tokens: one decode step
    (``osl = 2``), whose attention reads ``prompt + 1`` tokens."""
    return handle.run_static(batch_size=seqs, isl=prompt, osl=2, mode="static_gen")[1]


def relative_errors(engine: MeasuredEngine, handle: EngineHandle) -> dict[str, float]:
    """The largest relative error of prefill, decode and mixed steps over the module's points."""
    prefill = [float(engine.step_ms(L - o, 0, 0, o)) / static_prefill_ms(handle, L, o) - 1 for L, o in PREFILLS]
    decode = [float(engine.step_ms(0, b, b * (prompt + 1))) / static_decode_ms(handle, b, prompt) - 1
              for b, prompt in DECODES]
    mixed = [float(engine.step_ms(p, b, b * (p + osl // 2 + 1))) / handle.mixed_step_latency(p, b, p, osl, 0) - 1
             for p, b, osl in MIXED]
    return {kind: float(np.max(np.abs(errors))) for kind, errors in
            (("prefill", prefill), ("decode", decode), ("mixed", mixed))}


@pytest.mark.parametrize("name", CONFIGS)
def test_matches_aiconfigurator_static_estimates(engines, name):
    errors = relative_errors(*engines[name])
    assert max(errors.values()) <= TOLERANCE, errors


def test_vectorised_equals_pointwise(engines):
    engine, _ = engines["qwen30b-a3b-h100-vllm-tp2-ep2"]
    p, b, k, o = (np.array(v, dtype=float)
                  for v in ([0, 512, 3000, 0], [64, 8, 0, 1], [64 * 4000, 8 * 900, 0, 5], [0, 100, 2000, 0]))
    pointwise = [float(engine.step_ms(*args)) for args in zip(p, b, k, o)]
    np.testing.assert_array_equal(engine.step_ms(p, b, k, o), pointwise)
    assert engine.step_ms(np.zeros((2, 3)), 4, 4 * 1000).shape == (2, 3)


def test_extrapolates_past_the_tables(engines):
    engine, _ = engines["llama8b-h100-vllm-tp1"]
    top = LIMITS["max_tokens"]
    assert engine.prefill_ms(2 * top) > 2 * engine.prefill_ms(top) * 0.99  # attention grows with the pairs
    assert engine.decode_ms(2 * LIMITS["max_batch"], 1000) > engine.decode_ms(LIMITS["max_batch"], 1000)
    assert engine.step_ms(0, 0, 0) > 0  # an empty iteration is priced as the smallest pass


def test_source_names_aiconfigurator_and_the_configuration(engines):
    engine, _ = engines["llama70b-h200-vllm-tp8"]
    version = importlib.metadata.version("aiconfigurator-core")
    assert engine.source.startswith(f"measured: aiconfigurator-core {version}, h200_sxm, vllm ")
    assert engine.source.endswith(", TP 8, meta-llama/Meta-Llama-3.1-70B")
    assert "EP 2" in engines["qwen30b-a3b-h100-vllm-tp2-ep2"][0].source


def test_memory_facts(engines):
    memory = engines["llama8b-h100-vllm-tp1"][0].memory
    assert memory is not None
    assert memory.kv_bytes_per_token == 32 * 8 * 128 * 2 * 2  # layers x KV heads x head dim x (K, V) x bf16
    assert 15e9 < memory.weights_bytes < 17e9 and memory.gpu_bytes == 80 * 2**30


def test_matches_aiconfigurator_cli(engines):
    """The handle above is what aiconfigurator's CLI runs: its ``cli_estimate`` (the ``aiconfigurator`` package,
    not in the extra) gives the same static TTFT and TPOT."""
    api = pytest.importorskip("aiconfigurator.cli.api", reason="aiconfigurator's CLI package is not installed")
    engine, _ = engines["qwen30b-a3b-h100-vllm-tp2-ep2"]
    ttft = api.cli_estimate("Qwen/Qwen3-30B-A3B", "h100_sxm", mode="static_ctx", backend_name="vllm", isl=5000,
                            osl=1, batch_size=1, tp_size=2, moe_ep_size=2, prefix=2000).ttft
    tpot = api.cli_estimate("Qwen/Qwen3-30B-A3B", "h100_sxm", mode="static_gen", backend_name="vllm", isl=7776,
                            osl=2, batch_size=37, tp_size=2, moe_ep_size=2).tpot
    assert float(engine.step_ms(3000, 0, 0, 2000)) == pytest.approx(ttft, rel=TOLERANCE)
    assert float(engine.step_ms(0, 37, 37 * 7777)) == pytest.approx(tpot, rel=TOLERANCE)


# --- the disk cache ----------------------------------------------------------------------------------------------

SMALL = {"max_tokens": 64, "max_batch": 4, "cache": True}


def test_cache_is_reused_and_a_corrupt_file_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("OPTFLEET_CACHE_DIR", str(tmp_path))
    first = MeasuredEngine.build("h100_sxm", "vllm", None, "meta-llama/Meta-Llama-3.1-8B", 1, **SMALL)
    [path] = (tmp_path / "measured").glob("*.npz")

    def no_compile(*args, **kwargs):
        raise AssertionError("aiconfigurator queried although the tables are cached")

    with monkeypatch.context() as patched:
        patched.setattr(measured, "compile_handle", no_compile)
        cached = MeasuredEngine.build("h100_sxm", "vllm", "current", "meta-llama/Meta-Llama-3.1-8B", 1, **SMALL)
    grid = (np.arange(1, 70), 3, 3 * 40)
    np.testing.assert_array_equal(cached.step_ms(*grid), first.step_ms(*grid))
    assert cached.memory == first.memory

    path.write_bytes(b"not a numpy file")
    rebuilt = MeasuredEngine.build("h100_sxm", "vllm", None, "meta-llama/Meta-Llama-3.1-8B", 1, **SMALL)
    np.testing.assert_array_equal(rebuilt.step_ms(*grid), first.step_ms(*grid))
    assert measured.read_cached(path, measured.cache_key(rebuilt.config, rebuilt.aiconfigurator_version)) is not None


LLAMA = "meta-llama/Meta-Llama-3.1-8B"


def test_a_local_config_directory_is_a_model(tmp_path):
    bundled = importlib.resources.files("aiconfigurator_core").joinpath(
        "model_configs", "meta-llama--Meta-Llama-3.1-8B_config.json")
    (tmp_path / "config.json").write_text(bundled.read_text())
    local = MeasuredEngine.build("h100_sxm", "vllm", None, str(tmp_path), max_tokens=64, max_batch=4, cache=False)
    by_id = MeasuredEngine.build("h100_sxm", "vllm", None, LLAMA, max_tokens=64, max_batch=4, cache=False)
    assert local.source.endswith(f", TP 1, {tmp_path.resolve()}")
    assert float(local.step_ms(50, 3, 120, 5)) == float(by_id.step_ms(50, 3, 120, 5))


# --- bad input ---------------------------------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize("args, kwargs, field, listed", [
    (("h999_sxm", "vllm", None, LLAMA), {}, "hardware.performance.system", "h100_sxm"),
    (("b60", "trtllm", None, LLAMA), {}, "hardware.performance.backend", "vllm"),
    (("h100_sxm", "vllm", "0.11.0", LLAMA), {}, "hardware.performance.version", "(current)"),
    (("h100_sxm", "vllm", None, "no-such/model"), {}, "hardware.performance.model", LLAMA),
    (("h100_sxm", "vllm", None, LLAMA, 0), {}, "hardware.performance.tp", ">= 1"),
    (("h100_sxm", "vllm", None, LLAMA, 2), {"ep": 2}, "hardware.performance.ep", "not a mixture of experts"),
    (("h100_sxm", "vllm", None, "Qwen/Qwen3-30B-A3B", 2), {"ep": 4}, "hardware.performance.ep", "must divide"),
    (("h100_sxm", "vllm", None, LLAMA), {"gemm_quant": "fp9"}, "hardware.performance.gemm_quant", "fp8"),
    (("h100_sxm", "vllm", None, LLAMA), {"max_batch": 1}, "hardware.performance.max_batch", "at least"),
])
def test_bad_configuration_names_the_field_and_the_choices(args, kwargs, field, listed):
    with pytest.raises(InputError) as raised:
        MeasuredEngine.build(*args, cache=False, **kwargs)
    assert raised.value.field == field
    assert listed in str(raised.value)


def test_a_configuration_aiconfigurator_refuses_is_bad_input():
    with pytest.raises(InputError) as raised:  # 32 heads cannot be split 3 ways
        MeasuredEngine.build("h100_sxm", "vllm", None, LLAMA, 3, cache=False)
    assert raised.value.field == "hardware.performance"
    assert "aiconfigurator-core cannot model it" in str(raised.value)


@pytest.mark.unit
def test_missing_aiconfigurator_says_how_to_install(monkeypatch):
    real_version = importlib.metadata.version

    def without_aiconfigurator(name):
        if name == "aiconfigurator-core":
            raise importlib.metadata.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr(importlib.metadata, "version", without_aiconfigurator)
    measured.aiconfigurator_version.cache_clear()
    try:
        with pytest.raises(InputError) as raised:
            MeasuredEngine.build("h100_sxm", "vllm", None, LLAMA)
    finally:
        measured.aiconfigurator_version.cache_clear()
    assert raised.value.field == "hardware.performance.source"
    assert "pip install 'optfleet[measured]'" in str(raised.value)


@pytest.mark.unit
def test_catalog_lists_systems_backends_versions_and_models():
    catalog = measured_catalog()
    assert catalog["source"] == f"aiconfigurator-core {importlib.metadata.version('aiconfigurator-core')}"
    assert {"h100_sxm", "h200_sxm", "a100_sxm"} <= set(catalog["systems"])
    assert {"trtllm", "vllm", "sglang"} <= set(catalog["systems"]["h100_sxm"])
    assert any("current" in slots for slots in catalog["systems"]["h100_sxm"]["vllm"].values())
    assert LLAMA in catalog["models"] and "Qwen/Qwen3-30B-A3B" in catalog["models"]


def test_a_fleet_plans_on_the_measured_engine(tmp_path, monkeypatch):
    """A fleet instance with ``hardware.performance.source: measured`` solves, its header names the database, and the
    pool's affine form is the measured engine's reduction."""
    import yaml

    from optfleet.instance import load_instance
    from optfleet.problems.fleet import evaluate
    from optfleet.problems.fleet.heuristics import sweep
    from optfleet.problems.fleet.problem import prepare

    from support import FLEET_INSTANCES

    monkeypatch.setenv("OPTFLEET_CACHE_DIR", str(tmp_path))
    document = yaml.safe_load((FLEET_INSTANCES / "azure_2023_h100_engine.yaml").read_text())
    document["workload"]["lengths"]["cdf_file"] = str(FLEET_INSTANCES / "data" / "azure_2023_cdf.json")
    document["hardware"].update(model="Llama-3-8B", tp=1,
                                performance={"source": "measured", "backend": "vllm", "model": "meta-llama/Meta-Llama-3.1-8B"})
    problem = prepare(load_instance(document))
    step = problem.pool(8192).step
    assert step.source.startswith("measured: aiconfigurator-core") and "h100_sxm" in step.source and step.max_error < 0.1
    assert evaluate(problem, sweep(problem).plan).meets_slo


def test_placement_servers_time_their_iterations_on_the_measured_engine(tmp_path, monkeypatch):
    """A placement server with ``hardware.performance.source: measured`` takes the measured engine's reduction over its
    region (the fleet's, the same function), and its policies and bound run."""
    import copy

    import optfleet
    from optfleet.engine.reduce import affine_reduction

    monkeypatch.setenv("OPTFLEET_CACHE_DIR", str(tmp_path))
    from test_placement_engine import DOC

    document = copy.deepcopy(DOC)
    document["servers"][0]["hardware"]["performance"] = {"source": "measured", "backend": "vllm", "model": LLAMA}
    problem = optfleet.load(document).problem
    e = problem.engines[0]
    q = problem.requests
    longest = int((q.prompt_tokens + q.output_tokens).max())
    step = affine_reduction(MeasuredEngine.build("h100_sxm", "vllm", None, LLAMA, 1), 32, longest, min(2048, longest // 2))
    assert e.timing_source.startswith("measured: aiconfigurator-core") and step.max_error < 0.1
    assert e.timing_reduction.startswith(f"affine over 32 sequences and {longest:,} tokens: within {100 * step.max_error:.1f} %")
    assert (e.step_base_ms, e.prefill_ms_per_token, e.prefill_ms_per_pair) == (step.base_ms, step.per_prefill_token_ms, step.per_prefill_pair_ms)
    frame = optfleet.gap(document).set_index("method")
    assert frame.loc["round_robin", "objective"] >= frame.loc["relaxation_bound", "bound"] > 0


@pytest.mark.unit
def test_optfleet_catalog_lists_the_measured_systems_with_their_gpus_and_the_bundled_models(capsys):
    from optfleet.cli import main
    from optfleet.engine.sources import source_catalog

    section = source_catalog("measured")["measured"]
    assert section["installed"] is True and section["database"] == measured_catalog()["source"]
    assert section["systems"]["h100_sxm"]["gpu"] == "H100-SXM" and "vllm" in section["systems"]["h100_sxm"]["backends"]
    assert LLAMA in section["models"] and "Qwen/Qwen3-30B-A3B" in section["models"]
    assert main(["catalog", "--source", "measured"]) == 0
    out = capsys.readouterr().out
    assert "h100_sxm" in out and "H100-SXM" in out and "Qwen/Qwen3-30B-A3B" in out and "not available" not in out
