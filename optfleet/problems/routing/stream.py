"""The request stream a router sees: arrival, byte length, true prompt and output tokens, category.

``max_output_tokens`` of Eq. 3 is taken to be the request's output tokens (the budget the engine reserves); the
true prompt tokens are what ``usage.prompt_tokens`` reports back to the calibrator.

Synthesised (:func:`synthesise`): Poisson arrivals at the fleet instance's rate; an atom ``(L_in, L_out)`` of its
request mix drawn by probability, its total ``T_j`` replaced by a uniform integer in ``(T_{j-1}, T_j]`` (the
token-budget routing paper's generator, "inverse-CDF with uniform interpolation within each bucket", Appendix A).
A length CDF's mix already holds every integer length of each bucket with mass, uniformly
(``CdfTable.integer_lengths``), so there ``T_{j-1} = T_j - 1`` and the draw is the atom itself (a bucket without
mass stays empty); a trace's mix holds its distinct lengths, and ``T_{j-1}`` is the next shorter one.  The total is
split with the atom's output share
(``L_out = round(T L_out,j / T_j)``, ``L_in = T - L_out`` at least 1: a prompt has a byte); a category drawn by
share; ``bytes = max(1, round(L_in c_k exp(s Z - s^2 / 2)))``: a lognormal ratio with mean ``c_k`` and log-spread
``s``.
Read (:func:`read_stream`): a CSV with columns ``arrival_s, bytes, input_tokens, output_tokens, category``; its
times are shifted so that the first arrival is at 0 (the replay starts each pool in equilibrium at time 0 and
estimates a pool's rate as its requests over its last arrival time, so a file's clock must not change either).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.instance.data_files import refuse_cells, require_data_file
from optfleet.instance.shared_schema import MAX_TOKENS

COLUMNS = ("arrival_s", "bytes", "input_tokens", "output_tokens", "category")


@dataclass(frozen=True)
class Stream:
    """Requests in arrival order, ``arrival_s`` from the stream's start (time 0); ``category`` indexes ``names``;
    ``true_ratio[k]`` is category k's mean ratio."""

    arrival_s: NDArray[np.float64]
    bytes: NDArray[np.int64]
    input_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    category: NDArray[np.int64]
    names: tuple[str, ...]
    true_ratio: NDArray[np.float64]

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def total_tokens(self) -> NDArray[np.int64]:
        return self.input_tokens + self.output_tokens

    @property
    def span_s(self) -> float:
        return float(self.arrival_s[-1] - self.arrival_s[0]) if len(self) > 1 else 0.0


def synthesise(mix_l_in: NDArray[np.int64], mix_l_out: NDArray[np.int64], mix_prob: NDArray[np.float64], rate_rps: float,
               ratios: NDArray[np.float64], shares: NDArray[np.float64], names: tuple[str, ...], spread: float, count: int,
               seed: int, integer_mix: bool = False) -> Stream:
    """``count`` requests as in the module docstring (seeded); the mix's atoms are sorted by total tokens;
    ``integer_mix``: the mix holds every integer length of its buckets (a length CDF's)."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1.0 / rate_rps, size=count))
    atom = rng.choice(len(mix_prob), size=count, p=mix_prob)
    upper = (mix_l_in + mix_l_out).astype(np.int64)
    totals = np.unique(upper)
    lower = upper - 1 if integer_mix else np.concatenate(([0], totals))[np.searchsorted(totals, upper)]
    total = lower[atom] + 1 + np.floor(rng.random(count) * (upper[atom] - lower[atom])).astype(np.int64)
    l_out = np.rint(total * (mix_l_out[atom] / np.maximum(upper[atom], 1))).astype(np.int64)
    l_in = np.maximum(total - l_out, 1)
    category = rng.choice(len(shares), size=count, p=shares / shares.sum())
    ratio = ratios[category] * np.exp(spread * rng.standard_normal(count) - 0.5 * spread**2)
    bytes_ = np.maximum(np.rint(l_in * ratio), 1).astype(np.int64)
    return Stream(arrival, bytes_, l_in, l_out, category, names, np.asarray(ratios, dtype=np.float64))


def read_stream(path: Path, names: tuple[str, ...], ratios: NDArray[np.float64], unknown: str) -> Stream:
    """The CSV at ``path`` (module docstring), sorted by arrival.  A category not in ``names`` is refused
    (``unknown = "reject"``) or becomes a category of its own (``"default"``) whose true ratio is its observed mean;
    a known category's true ratio is its ``bytes_per_token``."""
    import pandas as pd

    require_data_file(path, "stream.file")
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise InputError("stream.file", str(path), f"cannot read the stream: {' '.join(str(exc).split())}") from exc
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise InputError("stream.file", str(path), f"missing columns {missing}; a stream has {', '.join(COLUMNS)}")
    if frame.empty:
        raise InputError("stream.file", str(path), "the stream has no request")
    numbers = {c: pd.to_numeric(frame[c], errors="coerce") for c in COLUMNS[:4]}

    def refuse(column: str, bad: np.ndarray, problem: str) -> None:
        refuse_cells(f"stream.{column}", frame[column], bad, problem, path)

    for column, values in numbers.items():
        refuse(column, ~np.isfinite(values.to_numpy(dtype=np.float64)), "not a finite number")
    for column in ("bytes", "input_tokens"):
        refuse(column, (numbers[column] <= 0).to_numpy(), "must be > 0 for every request")
    refuse("output_tokens", (numbers["output_tokens"] < 0).to_numpy(), "must be >= 0")
    for column in ("bytes", "input_tokens", "output_tokens"):
        values = numbers[column].to_numpy(dtype=np.float64)
        refuse(column, (values != np.floor(values)) | (values > MAX_TOKENS), f"must be a whole number of at most {MAX_TOKENS:,} (a count)")
    order = np.argsort(numbers["arrival_s"].to_numpy(dtype=np.float64), kind="stable")
    frame = frame.iloc[order]
    numbers = {c: values.iloc[order] for c, values in numbers.items()}
    labels = frame["category"].astype(str).to_numpy()
    extra = [c for c in dict.fromkeys(labels) if c not in names]
    if extra and unknown == "reject":
        raise InputError("stream.category", extra[0], f"not a category of the instance ({', '.join(names)}); set "
                         "unknown_category: default to route it with a tracker of its own")
    all_names = names + tuple(extra)
    code = {name: i for i, name in enumerate(all_names)}
    category = np.array([code[c] for c in labels], dtype=np.int64)
    bytes_ = numbers["bytes"].to_numpy(dtype=np.int64)
    l_in = numbers["input_tokens"].to_numpy(dtype=np.int64)
    observed_mean = [float(np.mean(bytes_[category == k] / l_in[category == k])) for k in range(len(names), len(all_names))]
    arrival = numbers["arrival_s"].to_numpy(dtype=np.float64)
    return Stream(arrival - arrival[0], bytes_, l_in, numbers["output_tokens"].to_numpy(dtype=np.int64),
                  category, all_names, np.concatenate([ratios, observed_mean]))
