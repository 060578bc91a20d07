"""Provider profiles: how a request becomes adjusted tokens, and what one reserved unit serves.

The catalog is package data (``provider_profiles.yaml``, every number with its source and date).  A resolved
:class:`Profile` gives the work of each request,

    B_j = w_in (I_j - C_j) + w_cache C_j + w_out O_j + w_think H_j

(I input tokens of which C cached, O output, H thinking).  The slosizer formalisation writes ``w_in I``; its code
charges the input weight on the uncached input only, ``I - C``, and cached input at ``w_cache``: optfleet follows
the code, so a cached token is never charged twice.  When the profile has a long-context rule, requests whose
input exceeds its threshold use its weights instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError

CATALOG_FILE = Path(__file__).with_name("provider_profiles.yaml")


@dataclass(frozen=True)
class Weights:
    """Burndown weights per input (uncached), cached input, output and thinking token."""

    w_in: float
    w_cache: float
    w_out: float
    w_think: float

    def work(self, input_tokens: NDArray, cached_tokens: NDArray, output_tokens: NDArray, thinking_tokens: NDArray) -> NDArray[np.float64]:
        """``w_in (I - C) + w_cache C + w_out O + w_think H`` per request (module docstring)."""
        return (self.w_in * (input_tokens - cached_tokens) + self.w_cache * cached_tokens
                + self.w_out * output_tokens + self.w_think * thinking_tokens).astype(np.float64)


@dataclass(frozen=True)
class Profile:
    """A resolved profile: ``tau`` adjusted tokens per second per unit, the weights (and the long-context
    weights above ``long_threshold_input_tokens``), the purchase grid and where the numbers come from."""

    provider: str
    model: str
    unit_name: str
    tau_tokens_per_s_per_unit: float
    weights: Weights
    min_units: int
    increment_units: int
    source: str
    long_threshold_input_tokens: int | None = None
    long_weights: Weights | None = None

    def work(self, input_tokens: NDArray, cached_tokens: NDArray, output_tokens: NDArray, thinking_tokens: NDArray) -> NDArray[np.float64]:
        """Each request's adjusted tokens ``B_j``, with the long-context weights where the input exceeds the
        threshold."""
        work = self.weights.work(input_tokens, cached_tokens, output_tokens, thinking_tokens)
        if self.long_weights is not None and self.long_threshold_input_tokens is not None:
            long = input_tokens > self.long_threshold_input_tokens
            if long.any():
                work[long] = self.long_weights.work(input_tokens[long], cached_tokens[long], output_tokens[long], thinking_tokens[long])
        return work

    def grid(self, max_units: int) -> NDArray[np.int64]:
        """The purchase grid up to ``max_units``: 0 (buy nothing), ``min_units``, then steps of ``increment_units``."""
        steps = np.arange(self.min_units, max(max_units, self.min_units) + 1, self.increment_units, dtype=np.int64)
        return np.concatenate([np.zeros(1, dtype=np.int64), steps])

    def round_up(self, units: float) -> int:
        """The smallest grid point at or above ``units`` (0 for ``units <= 0``)."""
        if units <= 1e-9:
            return 0
        if units <= self.min_units:
            return self.min_units
        steps = np.ceil((units - self.min_units) / self.increment_units - 1e-9)
        return int(self.min_units + steps * self.increment_units)

    def describe(self) -> str:
        w = self.weights
        name = self.provider if self.model == self.provider else f"{self.provider} {self.model}"
        text = (f"{name}: tau {self.tau_tokens_per_s_per_unit:,g} adjusted tokens/s per {self.unit_name}, "
                f"weights in {w.w_in:g} / cached {w.w_cache:g} / out {w.w_out:g} / think {w.w_think:g}")
        if self.long_weights is not None:
            lw = self.long_weights
            text += (f" (above {self.long_threshold_input_tokens:,} input tokens: {lw.w_in:g} / {lw.w_cache:g} / {lw.w_out:g} / "
                     f"{lw.w_think:g})")
        return text + f"; purchases {self.min_units} then steps of {self.increment_units}"


@cache
def catalog() -> dict[str, Any]:
    """The shipped catalog (provider_profiles.yaml), read once."""
    import yaml

    return yaml.safe_load(CATALOG_FILE.read_text())


def vertex_models() -> tuple[str, ...]:
    return tuple(catalog()["vertex"]["models"])


def resolve(spec: Any, field: str = "profile") -> Profile:
    """The :class:`Profile` of a profile spec (schema.VertexProfileSpec, AzurePtuProfileSpec or CustomProfileSpec)."""
    if spec.provider == "vertex":
        profile = _vertex(spec, field)
    elif spec.provider == "azure_ptu":
        profile = _azure(spec)
    else:
        profile = _custom(spec)
    grid = {k: v for k, v in (("min_units", spec.min_units), ("increment_units", spec.increment_units)) if v is not None}
    return profile if not grid else Profile(**{**profile.__dict__, **grid})


def _vertex(spec: Any, field: str) -> Profile:
    vertex = catalog()["vertex"]
    entry = vertex["models"].get(spec.model)
    if entry is None:
        raise InputError(f"{field}.model", spec.model, f"not in the Vertex catalog; known: {', '.join(vertex_models())}")
    w_out = float(entry["w_out"])
    weights = Weights(float(vertex["w_in"]), float(vertex["w_cache"]), w_out, float(entry.get("w_think", w_out)))
    long = entry.get("long_context")
    long_weights = None if long is None else Weights(float(long["w_in"]), float(long["w_cache"]), float(long["w_out"]),
                                                     float(long.get("w_think", long["w_out"])))
    return Profile("vertex", spec.model, vertex["unit_name"], float(entry["tau_tokens_per_s_per_unit"]), weights,
                   int(vertex["min_units"]), int(vertex["increment_units"]), " ".join(vertex["source"].split()),
                   None if long is None else int(long["threshold_input_tokens"]), long_weights)


def _azure(spec: Any) -> Profile:
    azure = catalog()["azure_ptu"]
    w_out = azure["w_out"] if spec.w_out is None else spec.w_out
    weights = Weights(float(azure["w_in"] if spec.w_in is None else spec.w_in), float(azure["w_cache"] if spec.w_cache is None else spec.w_cache),
                      float(w_out), float(w_out if spec.w_think is None else spec.w_think))
    grid = azure["deployments"][spec.deployment]
    return Profile("azure_ptu", spec.model, azure["unit_name"], float(spec.tau_tokens_per_s_per_unit), weights,
                   int(grid["min_units"]), int(grid["increment_units"]), " ".join(azure["source"].split()))


def _custom(spec: Any) -> Profile:
    weights = Weights(spec.w_in, spec.w_cache, spec.w_out, spec.w_out if spec.w_think is None else spec.w_think)
    long = spec.long_context
    long_weights = None if long is None else Weights(long.w_in, long.w_cache, long.w_out, long.w_out if long.w_think is None else long.w_think)
    return Profile("custom", spec.model, spec.unit_name, float(spec.tau_tokens_per_s_per_unit), weights, 1, 1, "given in the instance",
                   None if long is None else long.threshold_input_tokens, long_weights)
