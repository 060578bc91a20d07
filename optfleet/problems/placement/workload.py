"""The requests a placement instance routes: the shared-prefix generator, Poisson or stepped-QPS arrivals, CSV traces.

A request is its arrival time, its prompt and output lengths and where its prompt's tokens come from, which is
all the per-server prefix caches need (``cache.py``): the first ``shared_tokens`` are the system prompt of
``group`` (identical for every request of the group); the rest belong to ``session`` (a conversation: turn
``t + 1``'s prompt is turn ``t``'s prompt, its answer and a new question, so a session's token stream only grows).

The generator follows the shared-prefix data generator that the llm-d predicted-latency blog's scenarios A-D use
(inference-perf: ``num_groups`` system prompts, ``num_prompts_per_group`` users each, ``question_len +- sd``,
``output_len +- sd``, multi-turn histories appended turn by turn).  Each arrival goes to a user drawn uniformly at
random; lengths are normal draws rounded to whole tokens, at least 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from optfleet.errors import InputError
from optfleet.instance.data_files import refuse_cells, require_data_file
from optfleet.instance.shared_schema import MAX_TOKENS
from optfleet.problems.placement.schema import MAX_REQUESTS, ArrivalSpec, SharedPrefixSpec, WorkloadSpec


@dataclass(frozen=True)
class Requests:
    """Requests in arrival order (arrays of one length): arrival (ms), prompt and output tokens, the group's shared
    prefix (tokens, 0 without a group), group (-1 without), session, turn (1 = first) and QPS step index."""

    arrival_ms: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    shared_tokens: np.ndarray
    group: np.ndarray
    session: np.ndarray
    turn: np.ndarray
    step: np.ndarray
    step_rates_rps: tuple[float, ...] = ()

    def __len__(self) -> int:
        return int(self.arrival_ms.shape[0])


def arrival_times_s(spec: ArrivalSpec, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, tuple[float, ...]]:
    """Arrival times (s), each arrival's step index and the steps' rates: Poisson at ``rate_rps`` (``requests``
    arrivals), or a stepped ladder, Poisson at ``rate_rps`` for ``duration_s`` per step."""
    if spec.process == "poisson":
        gaps = rng.exponential(1.0 / spec.rate_rps, size=spec.requests)
        return np.cumsum(gaps) - gaps[0], np.zeros(spec.requests, dtype=np.int64), (float(spec.rate_rps),)
    times, steps, start = [], [], 0.0
    for i, step in enumerate(spec.steps):
        count = rng.poisson(step.rate_rps * step.duration_s)
        times.append(start + np.sort(rng.uniform(0.0, step.duration_s, size=count)))
        steps.append(np.full(count, i, dtype=np.int64))
        start += step.duration_s
    return np.concatenate(times), np.concatenate(steps), tuple(float(s.rate_rps) for s in spec.steps)


def _lengths(rng: np.random.Generator, mean: int, sd: float, n: int) -> np.ndarray:
    """``n`` normal draws of mean ``mean`` and deviation ``sd``, rounded, at least 1 token."""
    return np.maximum(1, np.rint(rng.normal(mean, sd, size=n))).astype(np.int64) if sd > 0 else np.full(n, mean, dtype=np.int64)


def shared_prefix(spec: SharedPrefixSpec, arrival_s: np.ndarray, steps: np.ndarray, rates: tuple[float, ...],
                  rng: np.random.Generator) -> Requests:
    """The shared-prefix workload over the given arrivals (module docstring): arrival ``i`` goes to a uniformly drawn
    user; a multi-turn user's prompt is ``system + history + question`` and the history then grows by the question
    and the answer; after ``max_turns`` turns, or when the prompt would exceed ``max_prompt_tokens``, the user starts
    a new conversation (a new session, history empty)."""
    n = arrival_s.shape[0]
    users = spec.num_groups * spec.num_prompts_per_group
    user_of = rng.integers(0, users, size=n)
    questions = _lengths(rng, spec.question_len, spec.question_len_sd, n)
    outputs = _lengths(rng, spec.output_len, spec.output_len_sd, n)
    history = np.zeros(users, dtype=np.int64)
    turns = np.zeros(users, dtype=np.int64)
    session_of_user = np.arange(users, dtype=np.int64)
    next_session = users
    prompt, session, turn = (np.empty(n, dtype=np.int64) for _ in range(3))
    system = spec.system_prompt_len
    for i in range(n):
        u = user_of[i]
        length = system + history[u] + questions[i]
        too_long = spec.max_prompt_tokens is not None and length > spec.max_prompt_tokens
        if not spec.multi_turn or turns[u] >= spec.max_turns or (too_long and history[u] > 0):
            session_of_user[u], next_session = next_session, next_session + 1
            history[u], turns[u] = 0, 0
            length = system + questions[i]
        prompt[i], session[i] = length, session_of_user[u]
        turns[u] += 1
        turn[i] = turns[u]
        history[u] += questions[i] + outputs[i]
    group = user_of // spec.num_prompts_per_group
    return Requests(arrival_s * 1000.0, prompt, outputs, np.full(n, system, dtype=np.int64), group.astype(np.int64), session, turn,
                    steps.astype(np.int64), rates)


TRACE_COLUMNS = {  # column: (required, a whole number, the value of an empty cell, the least value)
    "arrival_s": (True, False, None, 0),
    "prompt_tokens": (True, True, None, 1),
    "output_tokens": (True, True, None, 1),
    "shared_prefix_tokens": (False, True, 0, 0),
    "group": (False, True, -1, None),  # a negative id, like an empty cell, means none
    "session": (False, True, -1, None),
}


def _trace_column(frame, name: str, field: str, path) -> np.ndarray:
    """Column ``name`` of the trace (read as text) as float64 after its checks (``TRACE_COLUMNS``): every cell a
    finite number, whole where the column counts tokens or names an id, at least its least value and at most
    2**53 in size; an empty cell is an error in a required column, else its default.  An InputError names the
    column, the first bad cell and its row (rows counted from 1 after the header)."""
    import pandas as pd

    required, whole, default, least = TRACE_COLUMNS[name]
    if name not in frame.columns:
        return np.full(len(frame), float(default))
    text = frame[name].str.strip()
    empty = (text == "").to_numpy()
    values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float, copy=True)

    def refuse(mask: np.ndarray, problem: str) -> None:
        refuse_cells(f"{field}:{name}", frame[name], mask, problem, path)

    if required:
        refuse(empty, "an empty cell; every request needs arrival_s, prompt_tokens and output_tokens")
    values[empty] = default if default is not None else 0.0
    refuse(np.isnan(values) & (text.str.lower() != "nan").to_numpy(), "not a number")
    refuse(~np.isfinite(values), "must be a finite number")
    if whole:
        refuse(values != np.floor(values), "must be a whole number (tokens and ids are counted, not measured)")
        refuse(np.abs(values) > MAX_TOKENS, f"above the limit of {MAX_TOKENS:,} (the largest count float64 holds exactly)")
    if least is not None:
        refuse(values < least, f"must be >= {least}" + ("; every request needs at least one prompt and one output token" if least == 1 else ""))
    return values


def _first_disagreement(keys: np.ndarray, values: np.ndarray) -> tuple[int, int] | None:
    """The first row whose value differs from that of the first row with its key, and that first row (None if none)."""
    if keys.size == 0:
        return None
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    reference = first[inverse.ravel()]
    bad = np.flatnonzero(values != values[reference])
    return None if bad.size == 0 else (int(bad[0]), int(reference[bad[0]]))


def _refuse_mixed_origins(arrays: dict[str, np.ndarray], field: str, path) -> None:
    """A group's requests share one system prompt (one ``shared_prefix_tokens``) and a session's turns one group:
    the caches name a block by the group or the session it lies in (cache.py), which two lengths of one system
    prompt, or one conversation in two groups, would make ambiguous."""
    grouped = np.flatnonzero(arrays["group"] >= 0)
    clash = _first_disagreement(arrays["group"][grouped], arrays["shared_prefix_tokens"][grouped])
    if clash is not None:
        row, first = grouped[clash[0]], grouped[clash[1]]
        raise InputError(f"{field}:shared_prefix_tokens", int(arrays["shared_prefix_tokens"][row]),
                         f"group {int(arrays['group'][row])} has a {int(arrays['shared_prefix_tokens'][first]):,}-token shared prefix in "
                         f"row {first + 1} and this in row {row + 1} of {path}: a group's requests share one system prompt")
    named = np.flatnonzero(arrays["session"] >= 0)
    group = np.maximum(arrays["group"], -1)
    clash = _first_disagreement(arrays["session"][named], group[named])
    if clash is not None:
        row, first = named[clash[0]], named[clash[1]]
        raise InputError(f"{field}:group", _group_name(group[row]), f"session {int(arrays['session'][row])} is in "
                         f"{_group_name(group[first])} in row {first + 1} and in {_group_name(group[row])} in row {row + 1} of {path}: "
                         "a conversation's turns share their group")


def _group_name(group: float) -> str:
    return "none" if group < 0 else f"group {int(group)}"


def load_trace(path, field: str) -> Requests:
    """A CSV trace (schema ``TraceSpec``), sorted by arrival; ``field`` names the file in errors, a bad cell's column and row.
    An empty ``group`` or ``session`` cell means none (a request without a session is a conversation of its own)."""
    import pandas as pd

    require_data_file(Path(path), field)
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, ValueError) as exc:
        raise InputError(field, str(path), f"cannot read the trace ({' '.join(str(exc).split())})") from exc
    missing = [c for c in ("arrival_s", "prompt_tokens", "output_tokens") if c not in frame.columns]
    if missing or frame.empty:
        raise InputError(field, str(path), f"the trace needs rows and the columns arrival_s, prompt_tokens, output_tokens (missing: {missing})")
    if len(frame) > MAX_REQUESTS:
        raise InputError(field, str(path), f"{len(frame):,} rows: above the limit of {MAX_REQUESTS:,} requests (every policy replays every request)")
    arrays = {name: _trace_column(frame, name, field, path) for name in TRACE_COLUMNS}
    too_long = arrays["shared_prefix_tokens"] > arrays["prompt_tokens"]
    if too_long.any():
        row = int(np.argmax(too_long))
        raise InputError(f"{field}:shared_prefix_tokens", frame["shared_prefix_tokens"].iloc[row],
                         f"exceeds its prompt's {int(arrays['prompt_tokens'][row]):,} tokens (row {row + 1} of {path}): a shared prefix is part of the prompt")
    _refuse_mixed_origins(arrays, field, path)
    order = np.argsort(arrays["arrival_s"], kind="stable")
    arrays = {name: values[order] for name, values in arrays.items()}
    n = len(frame)
    session = arrays["session"].astype(np.int64)
    unnamed = session < 0
    session[unnamed] = session.max(initial=-1) + 1 + np.arange(int(unnamed.sum()))  # a request without a session has its own
    group = np.maximum(arrays["group"].astype(np.int64), -1)
    shared = np.where(group >= 0, arrays["shared_prefix_tokens"], 0).astype(np.int64)
    return Requests(arrays["arrival_s"] * 1000.0, arrays["prompt_tokens"].astype(np.int64), arrays["output_tokens"].astype(np.int64),
                    shared, group, session, np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int64), ())


MAX_ARRIVAL_S = 1e6
"""The latest arrival time (s, about 11.6 days): the simulator and the MILPs keep times in ms in double precision,
and the MILP's big-M rows lose their exactness on longer horizons (40 requests at 1e-7 per second, over 5e8 s, were
reported infeasible; at 1e-5 per second, over 4e6 s, the optimum still held)."""


def build_requests(spec: WorkloadSpec, resolve) -> Requests:
    """The instance's requests: its trace (``resolve`` turns its relative path into a path) or its generator; every
    arrival at most :data:`MAX_ARRIVAL_S`."""
    if spec.trace is not None:
        requests = load_trace(resolve(spec.trace.file), "workload.trace.file")
        if requests.arrival_ms[-1] > 1000.0 * MAX_ARRIVAL_S:
            raise InputError("workload.trace.file:arrival_s", requests.arrival_ms[-1] / 1000.0,
                             f"above the limit of {MAX_ARRIVAL_S:g} s: shift the arrival times to start near 0 (times are kept in ms)")
        return requests
    rng = np.random.default_rng(spec.seed)
    arrival_s, steps, rates = arrival_times_s(spec.arrivals, rng)
    if arrival_s.shape[0] == 0:
        raise InputError("workload.arrivals.steps", [s.model_dump() for s in spec.arrivals.steps], "the ladder draws no arrival")
    if arrival_s[-1] > MAX_ARRIVAL_S:
        field, value = (("workload.arrivals.rate_rps", spec.arrivals.rate_rps) if spec.arrivals.process == "poisson"
                        else ("workload.arrivals.steps", [s.model_dump() for s in spec.arrivals.steps]))
        raise InputError(field, value, f"the last arrival falls at {arrival_s[-1]:,.4g} s, above the limit of {MAX_ARRIVAL_S:g} s "
                         "(times are kept in ms in double precision)")
    return shared_prefix(spec.shared_prefix, arrival_s, steps, rates, rng)
