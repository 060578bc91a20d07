"""What each performance source knows, for ``optfleet catalog``: one section per ``hardware.performance.source``.

* ``roofline``: the built-in GPU and model catalog (:func:`~optfleet.hardware.catalog.catalog_rows`), the
  efficiency factors an instance may override with their defaults
  (:class:`~optfleet.hardware.profiles.ProfileAssumptions`), and what ``hardware.config_json`` reads
  (:mod:`optfleet.hardware.hf_config`: architectures, checkpoint dtypes, quantisation methods, weight formats);
* ``measured``: aiconfigurator-core's systems x backends x versions and bundled models
  (:func:`~optfleet.engine.measured.measured_catalog`), each system with the catalog GPU timed on it; without the
  ``measured`` extra, why it is unavailable and how to install it;
* ``fit``: the measurement files the fit reads (benchmark_files.py) and what identifies each coefficient (fit.py);
* ``affine``: the coefficients given directly (:data:`~optfleet.engine.step.AFFINE_FIELDS`).

Every section is a JSON-safe dict with an ``about`` line; :func:`source_catalog` gathers them by source name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

from optfleet.engine.benchmark_files import ITERATION_COLUMNS, JSON_SUFFIXES, TABLE_SUFFIXES
from optfleet.engine.fit import EXCITED_BY
from optfleet.engine.measured import DEFAULT_MEASURED_BACKEND, MEASURED_SYSTEMS
from optfleet.engine.step import AFFINE_FIELDS, MIN_BASE_MS
from optfleet.errors import InputError
from optfleet.hardware.catalog import catalog_rows
from optfleet.hardware.hf_config import ARCHITECTURES, CHECKPOINT_DTYPES, QUANT_METHODS, WEIGHT_FORMAT_BYTES
from optfleet.hardware.profiles import ProfileAssumptions

STEP_FORM = "t = base_ms + per_seq_ms b + per_kv_token_ms k + per_prefill_token_ms p + per_prefill_pair_ms pairs(p, o)"
"""The affine iteration time (ms) the ``fit`` and ``affine`` sources give (engine/step.py's :class:`AffineStep`)."""

AFFINE_MEANINGS = {
    "base_ms": f"ms per iteration, whatever it carries (required, at least {MIN_BASE_MS:g} ms)",
    "per_seq_ms": "ms per decoding sequence, b",
    "per_kv_token_ms": "ms per cached token the decodes read, k (the sum of their contexts)",
    "per_prefill_token_ms": "ms per prompt token of the iteration's prefill chunk, p",
    "per_prefill_pair_ms": "ms per query-key pair of the chunk, pairs(p, o) = p o + p (p + 1) / 2 (o: tokens cached before it)",
}

SERVING_BENCHMARKS = {
    "vllm": "vllm bench serve --save-result JSON (one run per line with --append-result; a burst at request rate inf "
            "needs --max-concurrency)",
    "aiperf": "AIPerf profile_export_aiperf.json",
    "guidellm": "GuideLLM benchmarks report JSON (one run per strategy)",
}
"""The serving-benchmark result files the fit reads, recognised by their keys (benchmark_files.py)."""


def roofline_section() -> dict[str, Any]:
    """The catalog's GPUs and models (rows without ``kind``), the efficiency factors with their defaults (the
    ``*_efficiency`` fields of :class:`ProfileAssumptions`, which ``hardware.performance`` may override), and what
    ``hardware.config_json`` reads."""
    rows = catalog_rows()
    return {
        "about": "first principles over the built-in GPU and model catalog, or any model from a Hugging Face config.json "
                 "(hardware.config_json)",
        "gpus": _rows_of_kind(rows, "gpu"),
        "models": _rows_of_kind(rows, "model"),
        "efficiencies": {f.name: f.default for f in fields(ProfileAssumptions) if f.name.endswith("_efficiency")},
        "config_json": {
            "architectures": list(ARCHITECTURES),
            "checkpoint_dtypes": list(CHECKPOINT_DTYPES),
            "quantisation_methods": list(QUANT_METHODS),
            "weight_formats": list(WEIGHT_FORMAT_BYTES),
        },
    }


def _rows_of_kind(rows: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The catalog rows of one ``kind`` ("gpu" or "model"), without the ``kind`` key."""
    return [{key: value for key, value in row.items() if key != "kind"} for row in rows if row["kind"] == kind]


def measured_section() -> dict[str, Any]:
    """aiconfigurator-core's database: ``systems`` as ``{system: {"gpu": catalog GPU or None, "backends": {backend:
    {version: [slot names]}}}}`` and the bundled ``models``; without the extra, ``installed`` False and the
    ``problem`` saying how to install it.  ``gpu_systems`` maps each catalog GPU to the system that times it.

    aiconfigurator is imported only here; so is the fleet kind's GPU-to-system map (optfleet/problems/fleet/
    performance.py), which lies above the engine layer."""
    from optfleet.engine.measured import aiconfigurator_version, measured_catalog

    section: dict[str, Any] = {
        "about": "NVIDIA aiconfigurator-core's per-operation database measured on real GPUs (the measured "
                 "extra); give model (a bundled id or a folder holding its config.json), backend (default "
                 f"{DEFAULT_MEASURED_BACKEND}), version (default current), system (default: the GPU's)",
        "gpu_systems": dict(MEASURED_SYSTEMS),
    }
    try:
        aiconfigurator_version()
    except InputError as missing:
        return {**section, "installed": False, "problem": missing.problem}
    catalog = measured_catalog()
    gpu_of = {system: gpu for gpu, system in MEASURED_SYSTEMS.items()}
    systems = {system: {"gpu": gpu_of.get(system), "backends": backends} for system, backends in catalog["systems"].items()}
    return {**section, "installed": True, "database": catalog["source"], "systems": systems, "models": catalog["models"]}


def fit_section() -> dict[str, Any]:
    """The files the fit reads (iteration tables with their columns, serving-benchmark results) and the data that
    identify each coefficient."""
    return {
        "about": f"a relative least-squares fit of {STEP_FORM} to your measurements: file names one or several; "
                 "fixed pins coefficients",
        "iteration_table": {
            "suffixes": list(TABLE_SUFFIXES),
            "note": "one row per measured iteration; CSV lines starting with # are comments; Parquet needs pyarrow "
                    "(pip install 'optfleet[parquet]')",
            "columns": dict(ITERATION_COLUMNS),
        },
        "serving_benchmarks": {"suffixes": list(JSON_SUFFIXES), "formats": dict(SERVING_BENCHMARKS)},
        "identified_by": {name: EXCITED_BY[name] for name in AFFINE_FIELDS},
    }


def affine_section() -> dict[str, Any]:
    """The coefficients given directly, each with its meaning (those left out are 0)."""
    return {
        "about": f"the iteration time given directly, {STEP_FORM} (ms); coefficients left out are 0",
        "coefficients": {name: AFFINE_MEANINGS[name] for name in AFFINE_FIELDS},
    }


def profile_section() -> dict[str, Any]:
    """The published profiles read (engine/published_profiles.py), each with the fields that pick its rows."""
    from optfleet.engine.published_profiles import PUBLISHED_PROFILES

    return {
        "about": "a published profile, so that a paper's setup is planned with its own numbers: file names one, "
                 "profile_model (and for Splitwise profile_hardware) picks its rows at the hardware block's tp",
        "formats": dict(PUBLISHED_PROFILES),
    }


SECTIONS: dict[str, Callable[[], dict[str, Any]]] = {
    "roofline": roofline_section,
    "measured": measured_section,
    "fit": fit_section,
    "affine": affine_section,
    "profile": profile_section,
}
SOURCES = tuple(SECTIONS)
"""The values of ``hardware.performance.source``, in the order the catalog lists them."""


def source_catalog(source: str = "all") -> dict[str, dict[str, Any]]:
    """``{source: section}`` for one source, or for every one with ``"all"``; InputError on ``source`` otherwise."""
    if source == "all":
        return {name: section() for name, section in SECTIONS.items()}
    if source not in SECTIONS:
        raise InputError("source", source, f"unknown performance source; one of {', '.join(SOURCES)} or all")
    return {source: SECTIONS[source]()}
