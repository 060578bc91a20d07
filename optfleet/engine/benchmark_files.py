"""The user's measurements as observations of the engine: rows ``time_ms ~ a . c`` of the fit in fit.py.

``c`` are the five :class:`~optfleet.engine.step.AffineStep` coefficients (``AFFINE_FIELDS`` order: base,
per_seq, per_kv_token, per_prefill_token, per_prefill_pair) and ``a`` their multipliers in one observation.
Every observation below is linear in ``c``, so the fit is a (non-negative) least squares.

(a) Measured iterations (CSV or Parquet, one row per forward pass): ``a = (1, b, k, p, pairs(p, o))``, the
step form itself.  Columns (see :data:`ITERATION_COLUMNS`): ``prefill_tokens`` p, ``decode_seqs`` b, the decodes'
context as ``decode_kv_tokens`` (k, the total) or ``decode_context_tokens`` (k / b, the mean per sequence),
optionally ``prefill_offset_tokens`` o (default 0), and ``time_ms``.  Lines starting with ``#`` are comments.

(b) Serving-benchmark runs (vLLM ``vllm bench serve --save-result`` JSON, AIPerf ``profile_export_aiperf.json``,
GuideLLM benchmarks JSON): each run gives its mean inter-token latency (ITL) and, at concurrency 1, its mean
time to first token (TTFT).  Assumptions:

* A1 every request in flight is in the engine's running batch (concurrency <= ``max_num_seqs`` and the KV cache
  holds them all: no preemption, no queue inside the server); client and network overheads are negligible;
* A2 a prompt is prefilled in one iteration (it fits the token budget), which also emits the first token; each
  later iteration emits one token per decoding request (no speculative decoding).  A request with ``I`` prompt
  and ``O`` output tokens so lives ``O`` iterations ("slots"): 1 prefill and ``O - 1`` decodes, the decode that
  emits token ``j + 1`` reading ``I + j`` KV tokens (``j = 1 .. O - 1``);
* A3 the other requests' phases are independent of a tagged request's (they are spread over their lives, not
  in lock-step).

Over the run's requests ``r`` (their means ``I, O`` when the file has no per-request lengths, which neglects the
variance of ``O`` and its covariance with ``I``) let

    S_O = sum O_r                        slots lived,
    S_g = sum (O_r - 1)                  inter-token gaps,
    S_k = sum (O_r - 1)(I_r + O_r / 2)   KV tokens read by all decode steps (sum over j of I_r + j),
    S_p = sum I_r,  S_q = sum I_r (I_r + 1) / 2   prompt tokens and their query-key pairs.

Another request in flight, seen at a random iteration, is in a random one of its slots (A3): on average it adds
``S_g / S_O`` decodes, ``S_k / S_O`` KV tokens, ``S_p / S_O`` prefill tokens and ``S_q / S_O`` pairs to the
iteration.  A gap of a tagged request is the iteration of one of its decode steps: that decode (1 sequence,
``S_k / S_g`` KV tokens on average over the gaps) plus ``m`` others, so the gap-weighted mean ITL is

    ITL = base + per_seq (1 + m S_g/S_O) + per_kv_token (S_k/S_g + m S_k/S_O)
               + per_prefill_token m S_p/S_O + per_prefill_pair m S_q/S_O.

Closed loop of ``N`` clients (each sends its next request when the previous ends): ``m = N - 1``.  Open loop
(Poisson arrivals, no cap): under A1 the engine is an M/G/oo system, and the others a request meets are Poisson
with mean ``N_bar = throughput x mean end-to-end latency`` (Little's law, PASTA): ``m = N_bar``.  With equal
lengths and large N this is ``base + per_seq N (O-1)/O + per_kv_token N (O-1)(I + O/2)/O + (per_prefill_token I
+ per_prefill_pair I(I+1)/2) N/O``: a decode batch of about N sequences at mean context ``I + O/2``, plus the
prefill compute of the ``N/O`` requests that start per iteration (each request's prefill is paid once in its O
slots).  As a check, a request's O slots then sum to O times the mean iteration time, and Little's law
``N = throughput x (end-to-end latency)`` holds exactly in the model.

TTFT is used only from closed-loop runs at N = 1: the engine is idle when the request arrives (its predecessor
has ended), so TTFT is the one iteration that prefills it,

    TTFT = base + per_prefill_token mean(I_r) + per_prefill_pair mean(I_r (I_r + 1) / 2).

At N > 1 an arrival first waits for part of the iteration in progress, a share that depends on client and
server timing rather than on the five coefficients, and a rate-driven run adds queueing; those TTFTs are left out.
A prompt longer than the token budget (against A2) is prefilled over ``ceil(I / budget)`` iterations: its TTFT
then holds that many ``base`` terms, which this model undercounts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.engine.step import prefill_pairs
from optfleet.errors import InputError
from optfleet.instance.data_files import refuse_cells, require_file

if TYPE_CHECKING:
    import pandas as pd

TABLE_SUFFIXES = (".csv", ".parquet", ".pq")
JSON_SUFFIXES = (".json", ".jsonl")

ITERATION_COLUMNS = {
    "prefill_tokens": "p, prompt tokens prefilled in the iteration (0 for a pure decode step)",
    "decode_seqs": "b, sequences that decode one token each",
    "decode_kv_tokens": "k, KV tokens the decodes read in all (the sum of their contexts)",
    "decode_context_tokens": "k / b, the decodes' mean context per sequence (instead of decode_kv_tokens)",
    "prefill_offset_tokens": "o, tokens of the prompt cached before the chunk (optional, default 0)",
    "time_ms": "the measured iteration time",
}
KV_COLUMNS = ("decode_kv_tokens", "decode_context_tokens")


@dataclass(frozen=True)
class Observation:
    """One measured time and its multipliers: ``time_ms ~ multipliers . (base, per_seq, per_kv_token,
    per_prefill_token, per_prefill_pair)``.

    ``field`` names the file as the caller does (``hardware.performance.file[2]``), ``source`` is the file's name
    and ``what`` the row or run inside it with the quantity measured (``row 7``, ``benchmarks[1] mean ITL``).
    """

    multipliers: tuple[float, float, float, float, float]
    time_ms: float
    field: str
    source: str
    what: str


@dataclass(frozen=True)
class ServingRun:
    """One steady-state run of a serving benchmark, as the observation model (module docstring) needs it.

    ``concurrency`` is N for a closed loop, the mean number in flight (Little's law) for an open one;
    ``prompt_tokens`` and ``output_tokens`` hold one entry per request, or the run's means (one entry each).
    """

    field: str
    source: str
    name: str
    closed_loop: bool
    concurrency: float
    prompt_tokens: NDArray[np.float64]
    output_tokens: NDArray[np.float64]
    mean_itl_ms: float
    mean_ttft_ms: float | None

    @property
    def others(self) -> float:
        """``m``, the other requests a tagged one shares its iterations with: ``N - 1`` closed, ``N_bar`` open."""
        return max(self.concurrency - 1.0, 0.0) if self.closed_loop else self.concurrency


def itl_multipliers(prompt_tokens: ArrayLike, output_tokens: ArrayLike, others: float) -> tuple[float, ...]:
    """Multipliers of the gap-weighted mean ITL (module docstring):
    ``(1, 1 + m S_g/S_O, S_k/S_g + m S_k/S_O, m S_p/S_O, m S_q/S_O)``."""
    prompt = np.asarray(prompt_tokens, dtype=np.float64)
    output = np.asarray(output_tokens, dtype=np.float64)
    slots, gaps = output.sum(), (output - 1.0).sum()
    kv = ((output - 1.0) * (prompt + output / 2.0)).sum()
    return tuple(float(x) for x in (1.0, 1.0 + others * gaps / slots, kv / gaps + others * kv / slots,
                                    others * prompt.sum() / slots, others * prefill_pairs(prompt).sum() / slots))


def ttft_multipliers(prompt_tokens: ArrayLike) -> tuple[float, ...]:
    """Multipliers of the mean TTFT on an idle engine: ``(1, 0, 0, mean I, mean I (I + 1) / 2)``."""
    prompt = np.asarray(prompt_tokens, dtype=np.float64)
    return (1.0, 0.0, 0.0, float(prompt.mean()), float(prefill_pairs(prompt).mean()))


def run_observations(run: ServingRun) -> list[Observation]:
    """The run's mean ITL, and its mean TTFT when it is a closed loop at concurrency 1."""
    observations = [Observation(itl_multipliers(run.prompt_tokens, run.output_tokens, run.others), run.mean_itl_ms,
                                run.field, run.source, f"{run.name} mean ITL".strip())]
    if run.closed_loop and run.concurrency == 1 and run.mean_ttft_ms is not None:
        observations.append(Observation(ttft_multipliers(run.prompt_tokens), run.mean_ttft_ms, run.field, run.source,
                                        f"{run.name} mean TTFT".strip()))
    return observations


# ---------------------------------------------------------------------------------------------------- files


def read_performance_files(paths: Sequence[str | Path], field: str = "hardware.performance.file") -> list[Observation]:
    """The observations of every file; errors name ``field[i]`` of the file at fault."""
    if not paths:
        raise InputError(field, [], "name at least one measurement file")
    return [obs for i, path in enumerate(paths) for obs in read_performance_file(Path(path), f"{field}[{i}]")]


def read_performance_file(path: Path, field: str) -> list[Observation]:
    """An iteration table (``.csv``, ``.parquet``) or a serving benchmark's results (``.json``, ``.jsonl``)."""
    suffix = path.suffix.lower()
    if suffix in TABLE_SUFFIXES:
        return read_iteration_table(path, field)
    if suffix in JSON_SUFFIXES:
        return read_serving_benchmark(path, field)
    raise InputError(field, str(path), f"unknown file type {path.suffix!r}: an iteration table is "
                     f"{' or '.join(TABLE_SUFFIXES)}, a serving benchmark's results {' or '.join(JSON_SUFFIXES)}")


def read_iteration_table(path: Path, field: str) -> list[Observation]:
    """One observation per row: ``a = (1, b, k, p, pairs(p, o))`` against ``time_ms``; a bad cell is named by its
    column and row."""
    frame = read_table(path, field)
    _check_columns(frame, path, field)
    p, b = table_cells(frame, "prefill_tokens", field, path), table_cells(frame, "decode_seqs", field, path)
    o = table_cells(frame, "prefill_offset_tokens", field, path) if "prefill_offset_tokens" in frame else np.zeros(len(frame))
    if "decode_kv_tokens" in frame:
        k = table_cells(frame, "decode_kv_tokens", field, path)
    else:
        k = b * table_cells(frame, "decode_context_tokens", field, path)
    time_ms = table_cells(frame, "time_ms", field, path, positive=True)
    rows = np.column_stack([np.ones(len(frame)), b, k, p, prefill_pairs(p, o)])
    return [Observation(tuple(map(float, row)), float(t), field, path.name, f"row {i + 1}")
            for i, (row, t) in enumerate(zip(rows, time_ms))]


def read_table(path: Path, field: str) -> pd.DataFrame:
    """The file's rows (CSV with ``#`` comments, or Parquet); an empty file or a header without rows is refused."""
    require_file(path, field)
    import pandas as pd  # imported here: pandas costs a quarter second of start-up

    parquet = path.suffix.lower() != ".csv"
    if parquet:
        try:
            import pyarrow  # noqa: F401  (pandas needs it for Parquet)
        except ImportError:
            raise InputError(field, str(path), "reading Parquet needs pyarrow: pip install 'optfleet[parquet]'") from None
    try:
        frame = pd.read_parquet(path) if parquet else pd.read_csv(path, comment="#", skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise InputError(field, str(path), "the file is empty (no header, no rows)") from None
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        reason = str(exc).strip().splitlines()[0]
        raise InputError(field, str(path), f"cannot be read as {'Parquet' if parquet else 'CSV'}: {reason}") from None
    if frame.empty:
        raise InputError(field, str(path), "the table has no rows (one row per measured iteration)")
    return frame


def _check_columns(frame: pd.DataFrame, path: Path, field: str) -> None:
    """Every required column, exactly one of the two context columns."""
    needed = ", ".join(f"{name} ({meaning})" for name, meaning in ITERATION_COLUMNS.items())
    for name in ("prefill_tokens", "decode_seqs", "time_ms"):
        if name not in frame.columns:
            raise InputError(field, str(path), f"missing column {name!r}; an iteration table has {needed}")
    given = [name for name in KV_COLUMNS if name in frame.columns]
    if len(given) != 1:
        problem = "gives both" if given else "gives neither of"
        raise InputError(field, str(path), f"{problem} {KV_COLUMNS[0]!r} (the total KV tokens the decodes read) and "
                         f"{KV_COLUMNS[1]!r} (their mean per sequence); give exactly one")


MAX_MEASURED_VALUE = 1e9
"""The largest count or time a measurement file may hold: a billion tokens or sequences in one run, or an iteration of
11.6 days, is a unit or export error; far larger values overflow the fit's attention pairs."""


def table_cells(frame: pd.DataFrame, name: str, field: str, path: Path, positive: bool = False) -> NDArray[np.float64]:
    """The column as floats: finite, >= 0 (> 0 with ``positive``) and at most :data:`MAX_MEASURED_VALUE`."""
    import pandas as pd

    raw = frame[name]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values) | ((values <= 0) if positive else (values < 0)) | (values > MAX_MEASURED_VALUE)
    refuse_cells(f"{field}:{name}", raw, bad, f"must be a finite number {'> 0' if positive else '>= 0'} and at most {MAX_MEASURED_VALUE:g}", path)
    return values


# ---------------------------------------------------------------------------------------- serving benchmarks


def read_serving_benchmark(path: Path, field: str) -> list[Observation]:
    """The observations of every run in a vLLM, AIPerf or GuideLLM results file (the format is recognised from
    its keys; a vLLM file written with ``--append-result`` holds one run per line)."""
    runs = [run for doc in json_documents(path, field) for run in _serving_runs(doc)]
    return [obs for run in runs for obs in run_observations(run)]


def json_documents(path: Path, field: str) -> list[_Doc]:
    """The file's JSON object, or its objects one per line."""
    require_file(path, field)
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError) as exc:
        raise InputError(field, str(path), f"cannot be read as UTF-8 text ({type(exc).__name__})") from None
    lines = {number: line for number, line in enumerate(text.splitlines(), start=1) if line.strip()}
    if not lines:
        raise InputError(field, str(path), "the file is empty (no benchmark results)")
    try:
        parsed = {0: json.loads(text)}
    except json.JSONDecodeError as whole:
        try:
            parsed = {number: json.loads(line) for number, line in lines.items()}
        except json.JSONDecodeError:
            raise InputError(field, str(path), f"not JSON: {whole}") from None
    if not all(isinstance(doc, dict) for doc in parsed.values()):
        raise InputError(field, str(path), "a benchmark results file holds JSON objects ({...})")
    return [_Doc(doc, field, path, f"line {number}: " if number else "") for number, doc in parsed.items()]


def _serving_runs(doc: _Doc) -> list[ServingRun]:
    """The runs of one document, by the format its keys show."""
    data = doc.data
    if "benchmarks" in data:
        return guidellm_runs(doc)
    if "input_config" in data or isinstance(data.get("inter_token_latency"), dict):
        return [aiperf_run(doc)]
    if "completed" in data:
        return [vllm_run(doc)]
    doc.refuse("", f"not a vLLM bench serve result ('completed', 'mean_itl_ms', ...), an AIPerf profile export "
               f"('input_config', 'inter_token_latency', ...) or a GuideLLM report ('benchmarks'); its keys are "
               f"{sorted(data)[:8]}")


@dataclass(frozen=True)
class _Doc:
    """A JSON object of ``path`` (``prefix`` locates it in the file) whose lookups refuse by key path."""

    data: dict[str, Any]
    field: str
    path: Path
    prefix: str = ""

    def refuse(self, key: str, problem: str) -> NoReturn:
        raise InputError(self.field, str(self.path), f"{self.prefix}{key}{': ' if key else ''}{problem}")

    def has(self, *keys: str) -> bool:
        node: Any = self.data
        for key in keys:
            if not isinstance(node, dict) or node.get(key) is None:
                return False
            node = node[key]
        return True

    def get(self, *keys: str, hint: str = "") -> Any:
        """The value at ``keys``; a missing (or null) one is refused, with ``hint`` saying where it comes from."""
        if not self.has(*keys):
            self.refuse(".".join(keys), f"missing{f' ({hint})' if hint else ''}")
        node: Any = self.data
        for key in keys:
            node = node[key]
        return node

    def number(self, *keys: str, positive: bool = True, hint: str = "") -> float:
        """The finite number at ``keys``, > 0 (or >= 0 without ``positive``)."""
        value = self.get(*keys, hint=hint)
        number = isinstance(value, (int, float)) and not isinstance(value, bool) and bool(np.isfinite(value))
        if not number or value < 0 or (positive and value == 0) or value > MAX_MEASURED_VALUE:
            self.refuse(".".join(keys), f"{value!r} is not a finite number {'> 0' if positive else '>= 0'} and at most {MAX_MEASURED_VALUE:g}")
        return float(value)

    def child(self, key: str, index: int) -> _Doc:
        """The ``index``-th object of the list at ``key``."""
        item = self.get(key)[index]
        if not isinstance(item, dict):
            self.refuse(f"{key}[{index}]", "not a JSON object")
        return _Doc(item, self.field, self.path, f"{self.prefix}{key}[{index}].")

    def time_ms(self, *keys: str) -> float | None:
        """An optional mean time: None when missing, or 0 (what a tool writes when it measured none)."""
        return self.number(*keys) if self.has(*keys) and self.get(*keys) != 0 else None

    def run(self, closed_loop: bool, concurrency: float, prompt: ArrayLike, output: ArrayLike, itl_ms: float,
            ttft_ms: float | None) -> ServingRun:
        """The run this document describes; outputs of one token (no inter-token gap) are refused."""
        prompt_tokens = np.atleast_1d(np.asarray(prompt, dtype=np.float64))
        output_tokens = np.atleast_1d(np.asarray(output, dtype=np.float64))
        if (output_tokens - 1.0).sum() <= 0:
            self.refuse("", "every output has one token or none: there is no inter-token latency to fit")
        return ServingRun(self.field, self.path.name, self.prefix.rstrip(". :"), closed_loop, concurrency,
                          prompt_tokens, output_tokens, itl_ms, ttft_ms)


def vllm_run(doc: _Doc) -> ServingRun:
    """A ``vllm bench serve --save-result`` file (vllm/benchmarks/serve.py).

    Read: ``request_rate`` (a number, or ``"inf"``: closed loop), ``max_concurrency`` (N, or null),
    ``completed``, ``total_input_tokens``, ``total_output_tokens``, ``mean_itl_ms`` (pooled over every gap, as the
    model's; ``mean_tpot_ms``, a per-request mean, when ITL was not among ``--percentile-metrics``),
    ``mean_ttft_ms``, and for Little's law ``request_throughput`` (req/s) with ``mean_e2el_ms`` (saved only when
    ``e2el`` is among ``--percentile-metrics``; otherwise ``mean_ttft_ms + (O - 1) mean_tpot_ms``).  With
    ``--save-detailed``, ``input_lens`` and ``output_lens`` give per-request lengths (a failed request has output 0
    and is left out).  Lacking: the server's token budget and ``max_num_seqs`` (A1, A2 are taken on trust); a
    burst (``request_rate`` inf without ``max_concurrency``, the tool's default) has no steady state and is refused.
    """
    completed = doc.number("completed")
    prompt, output = _vllm_lengths(doc, completed)
    itl_key = "mean_itl_ms" if doc.has("mean_itl_ms") else "mean_tpot_ms"
    itl_ms = doc.number(itl_key, hint="saved when itl or tpot is among --percentile-metrics")
    ttft_ms = doc.time_ms("mean_ttft_ms")
    if doc.data.get("request_rate", "inf") in ("inf", float("inf")):
        if not doc.has("max_concurrency"):
            doc.refuse("max_concurrency", "null with request_rate inf: every request was sent at once (a burst, no "
                       "steady state); rerun with --max-concurrency N or --request-rate R")
        return doc.run(True, doc.number("max_concurrency"), prompt, output, itl_ms, ttft_ms)
    doc.number("request_rate", hint='a rate in requests/s, or "inf"')
    e2e_ms = (doc.number("mean_e2el_ms") if doc.has("mean_e2el_ms")
              else doc.number("mean_ttft_ms") + (float(np.mean(output)) - 1.0) * doc.number("mean_tpot_ms"))
    return doc.run(False, doc.number("request_throughput") * e2e_ms / 1000.0, prompt, output, itl_ms, ttft_ms)


def _vllm_lengths(doc: _Doc, completed: float) -> tuple[ArrayLike, ArrayLike]:
    """Per-request lengths of the successful requests (``--save-detailed``), or the means from the totals."""
    if doc.has("input_lens") and doc.has("output_lens"):
        prompt = np.asarray(doc.get("input_lens"), dtype=np.float64)
        output = np.asarray(doc.get("output_lens"), dtype=np.float64)
        if (prompt.shape != output.shape or prompt.ndim != 1 or not (np.isfinite(prompt).all() and np.isfinite(output).all())
                or max(prompt.max(initial=0.0), output.max(initial=0.0)) > MAX_MEASURED_VALUE):
            doc.refuse("input_lens", "input_lens and output_lens must be lists of token counts of one length")
        done = output > 0
        return prompt[done], output[done]
    return doc.number("total_input_tokens", positive=False) / completed, doc.number("total_output_tokens") / completed


AIPERF_TIME_UNITS_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3, "sec": 1e3}


def aiperf_run(doc: _Doc) -> ServingRun:
    """An AIPerf ``profile_export_aiperf.json`` (aiperf/exporters/metrics_json_exporter.py): one object per metric
    tag with ``unit`` and ``avg``/``p50``/``p99``..., and the user's ``input_config``.

    Read: ``input_sequence_length.avg``, ``output_sequence_length.avg``, ``inter_token_latency.avg`` (a per-request
    mean: equal to the gap-weighted one when outputs have one length), ``time_to_first_token.avg``, and
    ``input_config.loadgen.concurrency`` / ``.request_rate``.  With a ``request_rate`` the run is an open loop whose
    mean concurrency is ``request_throughput.avg x request_latency.avg`` (Little's law).  The export leaves out
    settings the user did not set (``exclude_unset``), so a run at the default concurrency names neither: it is
    then taken as a closed loop at the Little's-law concurrency (and gives no TTFT).  Lacking: per-request lengths
    (means only) and the server's limits (A1, A2).
    """
    prompt = doc.number("input_sequence_length", "avg", positive=False)
    output = doc.number("output_sequence_length", "avg")
    itl_ms = _aiperf_ms(doc, "inter_token_latency")
    ttft_ms = _aiperf_ms(doc, "time_to_first_token") if doc.has("time_to_first_token", "avg") else None
    if doc.has("input_config", "loadgen", "concurrency") and not doc.has("input_config", "loadgen", "request_rate"):
        return doc.run(True, doc.number("input_config", "loadgen", "concurrency"), prompt, output, itl_ms, ttft_ms)
    throughput_unit = doc.get("request_throughput", "unit")
    if not str(throughput_unit).endswith(("/sec", "/s")):
        doc.refuse("request_throughput.unit", f"{throughput_unit!r} is not a rate per second")
    in_flight = doc.number("request_throughput", "avg") * _aiperf_ms(doc, "request_latency") / 1000.0
    return doc.run(not doc.has("input_config", "loadgen", "request_rate"), in_flight, prompt, output, itl_ms, ttft_ms)


def _aiperf_ms(doc: _Doc, tag: str) -> float:
    """The metric's ``avg`` in ms, by its ``unit``."""
    unit = doc.get(tag, "unit")
    if unit not in AIPERF_TIME_UNITS_MS:
        doc.refuse(f"{tag}.unit", f"{unit!r} is not a time unit ({', '.join(AIPERF_TIME_UNITS_MS)})")
    return doc.number(tag, "avg") * AIPERF_TIME_UNITS_MS[unit]


GUIDELLM_CLOSED = {"synchronous", "concurrent", "throughput"}
GUIDELLM_OPEN = {"constant", "poisson"}


def guidellm_runs(doc: _Doc) -> list[ServingRun]:
    """A GuideLLM report (guidellm/benchmark/schemas): ``benchmarks``, one per strategy of the profile."""
    benchmarks = doc.get("benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks:
        doc.refuse("benchmarks", "an empty list: the report holds no benchmark")
    return [guidellm_run(doc.child("benchmarks", i)) for i in range(len(benchmarks))]


def guidellm_run(bench: _Doc) -> ServingRun:
    """One GuideLLM benchmark.  Its strategy is ``config.strategy`` (``args.strategy`` before v0.4) with ``type_``
    ``synchronous`` (N = 1), ``concurrent`` (N = ``streams``), ``throughput`` (as many as the cap allows: a closed
    loop at the measured mean concurrency), ``constant`` or ``poisson`` (open loop; its mean concurrency is the
    measured one, ``metrics.request_concurrency.successful.mean``).  From ``metrics``, the ``successful``
    distributions' ``mean`` of ``prompt_token_count``, ``output_token_count``, ``inter_token_latency_ms``
    (weighted by each request's O - 1 gaps, as the model's) and ``time_to_first_token_ms``.  Lacking: the
    server's limits (A1, A2); per-request lengths are sampled only, so the means are used.
    """
    config = "config" if bench.has("config", "strategy") else "args"
    kind = bench.get(config, "strategy", "type_", hint="the benchmark's scheduling strategy")
    if kind not in GUIDELLM_CLOSED | GUIDELLM_OPEN:
        known = sorted(GUIDELLM_CLOSED | GUIDELLM_OPEN)
        bench.refuse(f"{config}.strategy.type_", f"unknown strategy {kind!r}; known: {known}")

    def mean(name: str, positive: bool = True) -> float:
        return bench.number("metrics", name, "successful", "mean", positive=positive)

    if kind == "synchronous":
        concurrency = 1.0
    elif kind == "concurrent":
        concurrency = bench.number(config, "strategy", "streams")
    else:
        concurrency = mean("request_concurrency")
    ttft_ms = bench.time_ms("metrics", "time_to_first_token_ms", "successful", "mean")
    return bench.run(kind in GUIDELLM_CLOSED, concurrency, mean("prompt_token_count", positive=False),
                     mean("output_token_count"), mean("inter_token_latency_ms"), ttft_ms)
