"""Published performance profiles as engines (``hardware.performance.source: profile``): DistServe's and Splitwise's.

Two disaggregated-serving papers publish the iteration times they plan with; reading them lets their setups be
planned here with the same numbers.

**DistServe** (Zhong et al., OSDI'24; ``simdistserve/estimators/profile_data/profiler-*.json`` in
LLMServe/DistServe, Apache-2.0): one JSON object, model name -> tensor-parallel degree (a string) -> closed forms
fitted to A100-80GB measurements, in ms:

* ``prefill: [a, b, c]``: a prefill iteration of prompts ``p_i`` takes ``a + b sum p_i + c sum p_i^2``;
* ``decoding_smallbs`` and ``decoding_largebs: [a, b, c]`` with ``decoding_large_small_bs_threshold`` T: a decode
  iteration of ``n`` sequences whose contexts (the tokens each reads, the new one included) sum to ``K`` takes
  ``a + b K + c n``, with the small-batch triple when ``n < T`` and the large-batch one otherwise.

The engine :class:`DistServeProfile` evaluates them as given (DistServe's simulator adds 1 ms per pipeline stage
to a prefill, an overhead its source marks as a placeholder; it is left out here).  Two readings are ours and are
stated where they matter:

* a chunk of ``p`` prompt tokens after ``o`` cached ones: ``sum p_i^2`` is the prompt's square, ``2 pairs(p, 0) -
  p`` with ``pairs(p, o) = p o + p (p + 1) / 2`` (engine/step.py); for a chunk the same law in its attention pairs
  is ``c (2 pairs(p, o) - p)``, equal to ``c p^2`` at ``o = 0``;
* the decode's ``K`` is this package's ``k + b``: ``k`` the KV tokens the ``b`` decodes read, plus their new tokens;
* a mixed iteration (a prefill chunk with decodes, as in a co-located engine with chunked prefill) is charged both
  profiles' work and one fixed cost, the larger intercept: the profiles were measured apart, and the kernels of
  one forward pass launch once.  A pure prefill or a pure decode iteration is the profile exactly.

**Splitwise** (Patel et al., ISCA'24; ``data/perf_model.csv`` in Mutinifni/splitwise-sim, MIT): measured runs, one
row each, with columns ``model, hardware, tensor_parallel, prompt_size, batch_size, token_size, prompt_time,
token_time`` (the power and end-to-end columns are not used).  A run prefills ``batch_size`` prompts of
``prompt_size`` tokens in one iteration (``prompt_time`` ms), then decodes ``token_size`` tokens; ``token_time`` is
its mean decode iteration (``prompt_time + (token_size - 1) token_time`` is the run's end-to-end time in the file).
Each row gives two observations of the affine step (engine/benchmark_files.py):

    prompt_time ~ (1, 0, 0, n P, n pairs(P, 0))                    n = batch_size, P = prompt_size,
    token_time  ~ (1, n, n (P + O / 2), 0, 0)                      O = token_size,

the decodes of a run reading ``P + 1 .. P + O - 1`` tokens each, ``P + O / 2`` on average.  The selected rows are
fitted by non-negative least squares (engine/fit.py), whose label states the fit's RMS and worst relative error.

A profile describes one GPU type: the file's (DistServe's in its name, Splitwise's in ``hardware``).  optfleet cannot
check that it is the hardware block's ``gpu``; the plan's prices and memory come from that ``gpu``.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.engine.benchmark_files import JSON_SUFFIXES, TABLE_SUFFIXES, Observation, json_documents, read_table, table_cells
from optfleet.engine.fit import fit_affine_step
from optfleet.engine.step import MIN_BASE_MS, EngineModel, prefill_pairs
from optfleet.errors import InputError

SPLITWISE_COLUMNS = ("model", "hardware", "tensor_parallel", "prompt_size", "batch_size", "token_size", "prompt_time",
                     "token_time")
DISTSERVE_KEYS = ("prefill", "decoding_smallbs", "decoding_largebs", "decoding_large_small_bs_threshold")
PUBLISHED_PROFILES = {
    "DistServe (.json)": "simdistserve/estimators/profile_data/profiler-*.json of LLMServe/DistServe: model -> TP -> "
                         "closed forms (A100-80GB), used as given",
    "Splitwise (.csv, .parquet)": "data/perf_model.csv of Mutinifni/splitwise-sim: measured runs (columns "
                                  f"{', '.join(SPLITWISE_COLUMNS)}) fitted to the affine step",
}
"""Each published profile format ``source: profile`` reads, with where it is published and how it is used."""


def profile_engine(path: Path, model: str | None, hardware: str | None, tp: int, field: str, tp_field: str) -> EngineModel:
    """The engine of a published profile: a DistServe profiler JSON as its closed forms, a Splitwise
    ``perf_model.csv`` (or Parquet) as the affine step fitted to its runs; ``field`` is the performance block's
    path (``hardware.performance``), ``tp_field`` the TP degree's."""
    suffix = path.suffix.lower()
    if suffix in JSON_SUFFIXES:
        if hardware is not None:
            raise InputError(f"{field}.profile_hardware", hardware, "applies to a Splitwise table; a DistServe profile "
                             "names no hardware (its GPU is in the file's name)")
        return read_distserve_profile(path, model, tp, field, tp_field)
    if suffix in TABLE_SUFFIXES:
        label, observations = splitwise_observations(path, model, hardware, tp, field, tp_field)
        return fit_affine_step(observations, label=label, field=f"{field}.file").step
    raise InputError(f"{field}.file", str(path), f"unknown file type {path.suffix!r}: a DistServe profile is "
                     f"{' or '.join(JSON_SUFFIXES)}, a Splitwise table {' or '.join(TABLE_SUFFIXES)}")


@dataclass(frozen=True)
class DistServeProfile(EngineModel):
    """DistServe's closed forms for one model at one TP degree (module docstring), in ms."""

    prefill: tuple[float, float, float]
    decode_small_batch: tuple[float, float, float]
    decode_large_batch: tuple[float, float, float]
    large_batch_from: float
    label: str

    @property
    def source(self) -> str:
        return self.label

    def step_ms(self, prefill_tokens: ArrayLike, decode_seqs: ArrayLike, decode_kv_tokens: ArrayLike,
                prefill_offset_tokens: ArrayLike = 0) -> NDArray[np.float64]:
        """``[p > 0] (b_p p + c_p (2 pairs(p, o) - p)) + [b > 0] (b_d (k + b) + c_d b) + the larger intercept of
        the phases present`` (module docstring)."""
        p = np.asarray(prefill_tokens, dtype=np.float64)
        b = np.asarray(decode_seqs, dtype=np.float64)
        k = np.asarray(decode_kv_tokens, dtype=np.float64)
        a_p, b_p, c_p = self.prefill
        small = b < self.large_batch_from
        a_d, b_d, c_d = (np.where(small, s, l) for s, l in zip(self.decode_small_batch, self.decode_large_batch))
        prefilling, decoding = p > 0, b > 0
        prefill_work = np.where(prefilling, b_p * p + c_p * (2.0 * prefill_pairs(p, prefill_offset_tokens) - p), 0.0)
        decode_work = np.where(decoding, b_d * (k + b) + c_d * b, 0.0)
        intercept = np.maximum(np.where(prefilling, a_p, 0.0), np.where(decoding, a_d, 0.0))
        return intercept + prefill_work + decode_work


def read_distserve_profile(path: Path, model: str | None, tp: int, field: str, tp_field: str) -> DistServeProfile:
    """The closed forms of ``model`` (may be left out when the file has one) at ``tp`` in a DistServe profiler file;
    ``field`` is the performance block's path, ``tp_field`` the TP degree's."""
    docs = json_documents(path, f"{field}.file")
    if len(docs) != 1:
        raise InputError(f"{field}.file", str(path), "a DistServe profile is one JSON object (model -> TP -> forms)")
    name = _choose(sorted(docs[0].data), model, f"{field}.profile_model", "models", str(path))
    by_tp = docs[0].data[name]
    if not isinstance(by_tp, Mapping):
        raise InputError(f"{field}.file", f"{path.name}: {name}", f"must map TP degrees to forms ({{\"1\": {{...}}}}); found "
                         f"{type(by_tp).__name__} {reprlib.repr(by_tp)}")
    if str(tp) not in by_tp:
        degrees = sorted(by_tp, key=str)
        listed = ", ".join(map(str, degrees[:12])) + (", ..." if len(degrees) > 12 else "")
        raise InputError(tp_field, tp, f"{path.name} profiles {name} at TP {listed or 'none'}, not at TP {tp}")
    forms = by_tp[str(tp)]
    where = f"{path.name}: {name} TP {tp}"
    triples = {key: _triple(forms, key, where, field) for key in DISTSERVE_KEYS[:3]}
    for key, (intercept, _, _) in triples.items():
        if intercept < MIN_BASE_MS:
            raise InputError(f"{field}.file", where, f"{key}'s fixed cost a = {intercept:g} ms is below {MIN_BASE_MS:g} ms: "
                             "an iteration with nothing in it would take no time")
    return DistServeProfile(prefill=triples["prefill"], decode_small_batch=triples["decoding_smallbs"],
                            decode_large_batch=triples["decoding_largebs"], large_batch_from=_threshold(forms, where, field),
                            label=f"profile: DistServe {where}")


def splitwise_observations(path: Path, model: str | None, hardware: str | None, tp: int, field: str,
                           tp_field: str) -> tuple[str, list[Observation]]:
    """The two observations of every run of ``model`` on ``hardware`` at ``tp`` in a Splitwise ``perf_model.csv``
    (module docstring), and a label naming them; ``model`` and ``hardware`` may be left out when the file has one."""
    file_field = f"{field}.file"
    frame = read_table(path, file_field)
    missing = [name for name in SPLITWISE_COLUMNS if name not in frame.columns]
    if missing:
        raise InputError(file_field, str(path), f"missing column {missing[0]!r}; a Splitwise perf_model.csv has "
                         f"{', '.join(SPLITWISE_COLUMNS)}")
    name = _choose(sorted(frame["model"].astype(str).unique()), model, f"{field}.profile_model", "models", str(path))
    frame = frame[frame["model"].astype(str) == name]
    gpu = _choose(sorted(frame["hardware"].astype(str).unique()), hardware, f"{field}.profile_hardware",
                  f"hardware for {name}", str(path))
    frame = frame[frame["hardware"].astype(str) == gpu]
    degrees = table_cells(frame, "tensor_parallel", file_field, path, positive=True)
    frame = frame[degrees == tp]
    if frame.empty:
        raise InputError(tp_field, tp, f"{path.name} measures {name} on {gpu} at TP {', '.join(f'{d:g}' for d in sorted(set(degrees)))}, not at TP {tp}")
    n, prompt, output = (table_cells(frame, column, file_field, path, positive=True)
                         for column in ("batch_size", "prompt_size", "token_size"))
    prompt_ms, token_ms = (table_cells(frame, column, file_field, path, positive=True) for column in ("prompt_time", "token_time"))
    rows = frame.index.to_numpy() + 1  # the table's row, counted from 1 as read_table's refusals count them
    observations = []
    for i, row in enumerate(rows):
        where = f"{name} {gpu} TP {tp} row {row}"
        observations.append(Observation((1.0, 0.0, 0.0, float(n[i] * prompt[i]), float(n[i] * prefill_pairs(prompt[i]))),
                                        float(prompt_ms[i]), file_field, path.name, f"{where} prompt_time"))
        if output[i] > 1:
            observations.append(Observation((1.0, float(n[i]), float(n[i] * (prompt[i] + output[i] / 2.0)), 0.0, 0.0),
                                            float(token_ms[i]), file_field, path.name, f"{where} token_time"))
    return f"Splitwise {path.name}: {name} on {gpu} TP {tp}", observations


def _choose(names: Sequence[str], wanted: str | None, field: str, what: str, path: str) -> str:
    """``wanted`` if the file has it; the file's only name when none is wanted; else an error listing them."""
    if wanted is not None and wanted in names:
        return wanted
    if wanted is None and len(names) == 1:
        return names[0]
    listed = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
    problem = f"{path} has no {wanted!r}" if wanted is not None else f"{path} has several {what}: name one"
    raise InputError(field, wanted, f"{problem} (its {what}: {listed or 'none'})")


def _triple(forms: Any, key: str, where: str, field: str) -> tuple[float, float, float]:
    """``forms[key]``: three finite numbers >= 0."""
    value = forms.get(key) if isinstance(forms, Mapping) else None
    numbers = np.asarray(value if isinstance(value, list) else [], dtype=object)
    ok = len(numbers) == 3 and all(_finite(x) for x in numbers)
    if not ok or min(numbers) < 0:
        raise InputError(f"{field}.file", where, f"{key} must be [a, b, c]: three finite numbers >= 0 "
                         f"(a DistServe profile has {', '.join(DISTSERVE_KEYS)}); found {reprlib.repr(value)}")
    return float(numbers[0]), float(numbers[1]), float(numbers[2])


def _finite(x: Any) -> bool:
    """Whether ``x`` is a JSON number (not a bool) that is finite as a float (an integer beyond float is not)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    try:
        return math.isfinite(float(x))
    except OverflowError:
        return False


def _threshold(forms: Mapping[str, Any], where: str, field: str) -> float:
    value = forms.get("decoding_large_small_bs_threshold")
    if not _finite(value) or value < 0:
        raise InputError(f"{field}.file", where, f"decoding_large_small_bs_threshold must be a batch size >= 0; found {reprlib.repr(value)}")
    return float(value)
