"""Read block-hash traces: Mooncake FAST'25, Alibaba Qwen-Bailian, and the generic format.  One JSON object a line.

Formats (:data:`FORMATS`; each states its block size and its time unit):

* ``mooncake`` — kvcache-ai/Mooncake ``FAST25-release/traces/*.jsonl``
  (Apache-2.0): ``timestamp`` (ms from the trace start), ``input_length``,
  ``output_length`` (tokens), ``hash_ids`` (remapped prefix-block hashes of
  **512-token** blocks).
* ``bailian`` — alibaba-edu/qwen-bailian-usagetraces-anon (Apache-2.0):
  ``chat_id``, ``parent_chat_id`` (-1 for a first turn), ``timestamp`` (s),
  ``input_length``, ``output_length``, ``type``, ``turn``, ``hash_ids``
  (salted hashes of **16-token** blocks).  ``parent_chat_id`` must name an
  earlier ``chat_id``; the sharing itself is read from ``hash_ids``.
* ``generic`` — ``arrival_s`` (s), ``input_tokens``, ``output_tokens``,
  ``block_hashes`` (integers or strings); the block size is the instance's
  ``block_tokens`` (it has no default).

Every line is checked by :func:`~optfleet.problems.prefix_cache.trace.build_block_trace`
(block count against ``input_length``, two parents, monotone times, empty
trace); a message names the field and the line (1-based).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from optfleet.errors import InputError
from optfleet.instance.data_files import require_data_file
from optfleet.instance.shared_schema import MAX_TOKENS
from optfleet.problems.prefix_cache.trace import BlockTrace, build_block_trace


@dataclass(frozen=True)
class TraceFormat:
    """Field names of one format, the scale of its time field to seconds and its block size (None: the instance's)."""

    name: str
    time: str
    seconds_per_time_unit: float
    input: str
    output: str
    hashes: str
    block_tokens: int | None
    source: str


FORMATS: dict[str, TraceFormat] = {
    "mooncake": TraceFormat("mooncake", "timestamp", 1e-3, "input_length", "output_length", "hash_ids", 512,
                            "Mooncake FAST'25 (kvcache-ai/Mooncake, FAST25-release/traces, Apache-2.0)"),
    "bailian": TraceFormat("bailian", "timestamp", 1.0, "input_length", "output_length", "hash_ids", 16,
                           "Alibaba Qwen-Bailian (alibaba-edu/qwen-bailian-usagetraces-anon, Apache-2.0)"),
    "generic": TraceFormat("generic", "arrival_s", 1.0, "input_tokens", "output_tokens", "block_hashes", None, "optfleet generic block trace"),
}


def block_tokens_of(fmt: str, block_tokens: int | None, field: str = "trace") -> int:
    """The format's block size; a ``block_tokens`` given for a format with its own size must equal it."""
    spec = FORMATS[fmt]
    if spec.block_tokens is None:
        if block_tokens is None:
            raise InputError(f"{field}.block_tokens", None, "the generic format needs the block size (block_tokens)")
        return block_tokens
    if block_tokens is not None and block_tokens != spec.block_tokens:
        raise InputError(f"{field}.block_tokens", block_tokens, f"{fmt} traces have {spec.block_tokens}-token blocks")
    return spec.block_tokens


def read_block_trace(path: str | Path, fmt: str, block_tokens: int | None = None, field: str = "trace",
                     max_requests: int | None = None) -> BlockTrace:
    """Read ``path`` in format ``fmt`` (the first ``max_requests`` requests if given) into a validated trace."""
    if fmt not in FORMATS:
        raise InputError(f"{field}.format", fmt, f"unknown trace format; known: {', '.join(FORMATS)}")
    spec = FORMATS[fmt]
    size = block_tokens_of(fmt, block_tokens, field)
    path = Path(path)
    require_data_file(path, f"{field}.file")
    times: list[float] = []
    written: list[float] = []
    inputs: list[int] = []
    outputs: list[int] = []
    paths: list[list[object]] = []
    lines: list[int] = []
    chats: set[object] = set()
    with path.open("rb") as stream:
        for number, raw in enumerate(stream, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"{field}.file", str(path), f"line {number} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
            if not line.strip():
                continue
            if max_requests is not None and len(times) >= max_requests:
                break
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{field}.file", str(path), f"line {number} is not JSON: {exc.msg}") from None
            except RecursionError:
                raise InputError(f"{field}.file", str(path), f"line {number} nests too deeply to be a trace line") from None
            if not isinstance(row, dict):
                raise InputError(f"{field}.file", str(path), f"line {number} is not a JSON object")
            for key in (spec.time, spec.input, spec.output, spec.hashes):
                if key not in row:
                    raise InputError(f"{field}.{key}", None, f"line {number}: missing (a {fmt} trace line has "
                                                            f"{spec.time}, {spec.input}, {spec.output}, {spec.hashes})")
            time = row[spec.time]
            if isinstance(time, bool) or not isinstance(time, (int, float)):
                raise InputError(f"{field}.{spec.time}", time, f"line {number}: not a number")
            if abs(time) > MAX_TOKENS:  # an integer past float64, or a float like 1e308 (no trace runs 2^53 time units)
                raise InputError(f"{field}.{spec.time}", time, f"line {number}: an arrival time must be a finite number >= 0 "
                                                                f"of at most {MAX_TOKENS:,}")
            if not isinstance(row[spec.hashes], list):
                raise InputError(f"{field}.{spec.hashes}", row[spec.hashes], f"line {number}: a list of block hashes")
            if fmt == "bailian":
                _check_parent_chat(row, chats, field, number)
            times.append(float(time) * spec.seconds_per_time_unit)
            written.append(time)
            inputs.append(row[spec.input])
            outputs.append(row[spec.output])
            paths.append(row[spec.hashes])
            lines.append(number)
    return build_block_trace(times, inputs, outputs, paths, size, field=field, line_of=lines, times_as_written=written, time_field=spec.time,
                             names=(spec.input, spec.output, spec.hashes))


def _check_parent_chat(row: dict, chats: set[object], field: str, number: int) -> None:
    """A Bailian turn's ``parent_chat_id`` is -1 or an earlier line's ``chat_id``."""
    chat, parent = row.get("chat_id"), row.get("parent_chat_id", -1)
    if chat is None:
        raise InputError(f"{field}.chat_id", None, f"line {number}: missing")
    for name, value in (("chat_id", chat), ("parent_chat_id", parent)):
        if isinstance(value, (bool, list, dict)):
            raise InputError(f"{field}.{name}", value, f"line {number}: a chat id is an integer or a string")
    if parent != -1 and parent not in chats:
        raise InputError(f"{field}.parent_chat_id", parent, f"line {number}: names no earlier chat_id (-1 marks a first turn)")
    chats.add(chat)
