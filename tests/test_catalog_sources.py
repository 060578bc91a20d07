"""``optfleet catalog``: what each performance source knows (optfleet/engine/sources.py), as text and as one JSON
document keyed by source.  The measured section is checked here without aiconfigurator-core (its installed form is
in test_engine_measured.py, run in the extra's venv)."""

from __future__ import annotations

import importlib.metadata
import json
import typing

import pytest

from optfleet.cli import main
from optfleet.engine import measured
from optfleet.engine.benchmark_files import ITERATION_COLUMNS
from optfleet.engine.sources import SOURCES, source_catalog
from optfleet.engine.step import AFFINE_FIELDS
from optfleet.errors import EXIT_BAD_INPUT, EXIT_OK, InputError
from optfleet.hardware.catalog import GPUS, MODELS
from optfleet.hardware.hf_config import ARCHITECTURES
from optfleet.hardware.profiles import ProfileAssumptions
from optfleet.engine.measured import MEASURED_SYSTEMS
from optfleet.problems.fleet.schema import PerformanceSpec

pytestmark = pytest.mark.unit

INSTALL = "pip install 'optfleet[measured]'"


@pytest.fixture
def no_aiconfigurator(monkeypatch: pytest.MonkeyPatch) -> None:
    """aiconfigurator-core reads as not installed, whichever venv runs the test."""
    real_version = importlib.metadata.version

    def without_aiconfigurator(name: str) -> str:
        if name == measured.DISTRIBUTION:
            raise importlib.metadata.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr(importlib.metadata, "version", without_aiconfigurator)
    measured.aiconfigurator_version.cache_clear()
    yield
    measured.aiconfigurator_version.cache_clear()


def test_the_sources_are_the_schemas():
    assert SOURCES == typing.get_args(PerformanceSpec.model_fields["source"].annotation)


def test_roofline_lists_the_catalog_the_efficiencies_and_what_a_config_json_may_hold():
    roofline = source_catalog("roofline")["roofline"]
    assert [row["name"] for row in roofline["gpus"]] == list(GPUS)
    assert [row["name"] for row in roofline["models"]] == list(MODELS)
    assert all(row["source"] and "kind" not in row for row in roofline["gpus"] + roofline["models"])
    overridable = [name for name in PerformanceSpec.model_fields if name.endswith("_efficiency")]
    assert roofline["efficiencies"] == {name: getattr(ProfileAssumptions(), name) for name in overridable}
    assert roofline["config_json"]["architectures"] == list(ARCHITECTURES)
    assert {"bfloat16", "float16"} <= set(roofline["config_json"]["checkpoint_dtypes"])
    assert {"fp8", "int4", "nvfp4"} <= set(roofline["config_json"]["weight_formats"])


def test_measured_without_the_extra_says_how_to_install_it(no_aiconfigurator):
    section = source_catalog("measured")["measured"]
    assert section["installed"] is False and INSTALL in section["problem"]
    assert section["gpu_systems"] == MEASURED_SYSTEMS
    assert "systems" not in section and "models" not in section


def test_fit_lists_the_file_formats_their_columns_and_what_identifies_each_coefficient():
    fit = source_catalog("fit")["fit"]
    assert fit["iteration_table"]["suffixes"] == [".csv", ".parquet", ".pq"]
    assert fit["iteration_table"]["columns"] == ITERATION_COLUMNS
    assert fit["serving_benchmarks"]["suffixes"] == [".json", ".jsonl"]
    assert set(fit["serving_benchmarks"]["formats"]) == {"vllm", "aiperf", "guidellm"}
    assert tuple(fit["identified_by"]) == AFFINE_FIELDS


def test_affine_names_every_coefficient():
    affine = source_catalog("affine")["affine"]
    assert tuple(affine["coefficients"]) == AFFINE_FIELDS and "required" in affine["coefficients"]["base_ms"]


def test_all_is_every_source_in_order_and_an_unknown_source_is_refused(no_aiconfigurator):
    assert tuple(source_catalog()) == SOURCES
    with pytest.raises(InputError) as raised:
        source_catalog("gpu")
    assert raised.value.field == "source"


def test_the_cli_prints_one_section_per_source_after_the_gpu_and_model_tables(no_aiconfigurator, capsys):
    assert main(["catalog"]) == EXIT_OK
    out = capsys.readouterr().out
    headings = [line.split(":")[0] for line in out.splitlines() if line.split(":")[0] in {s.upper() for s in SOURCES}]
    assert headings == [s.upper() for s in SOURCES]
    assert out.index("GPUS") < out.index("MODELS") < out.index("MEASURED:")
    for name in ("H100-SXM", "MI300X", "Qwen3-235B-A22B", "Qwen3MoeForCausalLM", "decode_context_tokens", "guidellm",
                 "per_prefill_pair_ms", f"not available: needs aiconfigurator-core, which is not installed: {INSTALL}"):
        assert name in out


@pytest.mark.parametrize("source", [*SOURCES, "all"])
def test_the_cli_json_is_one_document_keyed_by_source(source, no_aiconfigurator, capsys):
    assert main(["catalog", "--source", source, "--json"]) == EXIT_OK
    document = json.loads(capsys.readouterr().out)
    assert tuple(document) == (SOURCES if source == "all" else (source,))
    assert all(section["about"] for section in document.values())


def test_a_bad_source_option_is_refused_by_argparse(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["catalog", "--source", "gpu"])
    assert exit_info.value.code == EXIT_BAD_INPUT
    assert "--source" in capsys.readouterr().err
