"""A reserved instance in numbers: the trace, the profile, the windows, the prices and the questions asked.

``prepare`` loads the trace (``trace.py``), resolves the profile (``profiles.py``), computes every request's
adjusted tokens ``B_j`` and pay-as-you-go cost, and cuts the trace into windows at every width of
``windows_s`` and at ``cost_window_s`` (``windows.py``).  A request's pay-as-you-go cost is

    paygo_j = (p_in (I_j - C_j) + p_cached C_j + p_out (O_j + H_j)) / 1e6   $

(thinking tokens at the output price, cached input at ``p_cached``, default the input price).
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InfeasibleError, InputError
from optfleet.instance.loader import LoadedInstance
from optfleet.problems.reserved.latency import BaselineLatency, baseline_latency
from optfleet.problems.reserved.profiles import Profile, resolve
from optfleet.problems.reserved.schema import MAX_UNITS, MAX_WINDOWS, ReservedInstanceSpec
from optfleet.problems.reserved.trace import RequestTrace, read_trace
from optfleet.problems.reserved.windows import WindowSeries, window_series


@dataclass(frozen=True)
class Prices:
    """$ per unit-hour and per million pay-as-you-go tokens (None: the instance gives no prices)."""

    unit_per_hour: float
    input_per_million: float
    cached_per_million: float
    output_per_million: float

    def request_cost(self, trace: RequestTrace) -> NDArray[np.float64]:
        """``paygo_j`` of the module docstring."""
        return ((self.input_per_million * (trace.input_tokens - trace.cached_tokens) + self.cached_per_million * trace.cached_tokens
                 + self.output_per_million * (trace.output_tokens + trace.thinking_tokens)) / 1e6).astype(np.float64)


@dataclass(frozen=True)
class Scenario:
    """One trace of a robust question: its name and its cost windows."""

    name: str
    cost_windows: WindowSeries
    windows: tuple[WindowSeries, ...]


@dataclass(frozen=True)
class CommitmentModel:
    """One model of a commitment question: the trace classes it serves, its profile and its cost windows."""

    name: str
    profile: Profile
    cost_windows: WindowSeries


@dataclass(frozen=True)
class ReservedProblem:
    """Everything the methods need (module docstring)."""

    name: str
    spec: ReservedInstanceSpec
    trace: RequestTrace
    profile: Profile
    work: NDArray[np.float64]
    prices: Prices | None
    windows: tuple[WindowSeries, ...]
    cost_windows: WindowSeries
    max_units: int
    baseline: BaselineLatency
    scenarios: tuple[Scenario, ...] = ()
    commitment_models: tuple[CommitmentModel, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def plans(self):
        return self.spec.plans

    @property
    def unit_name(self) -> str:
        return self.profile.unit_name

    @cached_property
    def baseline_latency_s(self) -> NDArray[np.float64]:
        return self.baseline.predict_s(self.trace)

    def grid(self, max_units: int | None = None) -> NDArray[np.int64]:
        return self.profile.grid(self.max_units if max_units is None else max_units)


def prepare(loaded: LoadedInstance) -> ReservedProblem:
    spec: ReservedInstanceSpec = loaded.spec
    split_s = spec.plans.robust.split_s if spec.plans.robust is not None else None
    if split_s is not None:
        _check_piece_width(split_s, spec.cost_window_s)  # before the trace is read or drawn
    profile = resolve(spec.profile)
    trace = read_trace(spec.trace, loaded.base_dir)
    _check_span(trace, spec, "trace")
    if split_s is not None:
        _check_pieces(split_s, trace)  # before the trace's windows and prices are computed
    prices = _prices(spec)
    paygo = prices.request_cost(trace) if prices is not None else np.zeros(len(trace))
    work = profile.work(trace.input_tokens, trace.cached_tokens, trace.output_tokens, trace.thinking_tokens)
    tau = profile.tau_tokens_per_s_per_unit
    windows = tuple(window_series(trace.arrival_s, work, paygo, tau, w) for w in spec.windows_s)
    cost_windows = window_series(trace.arrival_s, work, paygo, tau, spec.cost_window_s)
    peak = max(float(s.units_needed.max()) for s in (*windows, cost_windows))
    max_units = spec.max_units if spec.max_units is not None else max(profile.round_up(peak), profile.min_units)
    if max_units > MAX_UNITS:
        raise InputError("profile.tau_tokens_per_s_per_unit", profile.tau_tokens_per_s_per_unit,
                         f"the busiest window would need {peak:,.4g} {profile.unit_name}s, above the limit of {MAX_UNITS:,} (the purchase "
                         "grid is scanned unit step by unit step): check tau and the trace's time_unit, or widen the windows")
    _needs_prices(spec, prices)
    _asks_something(spec, prices)
    if max_units < profile.min_units:
        raise InputError("max_units", max_units, f"below the profile's first purchase of {profile.min_units} {profile.unit_name}s: "
                         "the purchase grid holds no unit count but 0")
    notes = list(trace.notes)
    scenarios = _scenarios(spec, loaded, trace, profile, prices, work, paygo, notes) if spec.plans.robust is not None else ()
    models = _commitment_models(spec, trace, profile, prices) if spec.plans.commitment is not None else ()
    return ReservedProblem(spec.name, spec, trace, profile, work, prices, windows, cost_windows, max_units,
                           baseline_latency(trace, spec.baseline_latency), scenarios, models, tuple(notes))


def _check_span(trace: RequestTrace, spec: ReservedInstanceSpec, field: str) -> None:
    windows = trace.span_s / min(spec.cost_window_s, *spec.windows_s)
    if windows > MAX_WINDOWS:
        span = f"{trace.span_s:,.0f}" if trace.span_s < 1e12 else f"{trace.span_s:.3g}"
        raise InputError(field, trace.source, f"spans {span} s: {windows:,.4g} windows of the smallest width, above the limit of "
                         f"{MAX_WINDOWS:,} (each window is a row of the exact models); use wider windows or a shorter trace")


def _prices(spec: ReservedInstanceSpec) -> Prices | None:
    p = spec.prices
    if p is None:
        return None
    cached = p.paygo_input_per_million if p.paygo_cached_per_million is None else p.paygo_cached_per_million
    return Prices(p.unit_per_hour, p.paygo_input_per_million, cached, p.paygo_output_per_million)


def _needs_prices(spec: ReservedInstanceSpec, prices: Prices | None) -> None:
    """The cost questions need prices; ``plans.hybrid`` defaults to true, so only an explicit ask is an error."""
    if prices is not None:
        return
    for name in ("backlog", "robust", "commitment"):
        if getattr(spec.plans, name) is not None:
            raise InputError(f"plans.{name}", "given", "a cost question needs prices: give prices.unit_per_hour (and pay-as-you-go prices)")


def _asks_something(spec: ReservedInstanceSpec, prices: Prices | None) -> None:
    """An instance must ask at least one question (methods.py), or no method would run."""
    plans = spec.plans
    asked = plans.percentiles or plans.latency or (plans.hybrid and prices is not None) or plans.backlog or plans.robust or plans.commitment
    if not asked:
        raise InputError("plans", "no question", "give percentiles, a latency target, prices (the hybrid question), backlog, robust "
                         "or commitment")


MAX_ROBUST_PIECES = 10_000
"""Scenarios a trace may be cut into by ``plans.robust.split_s``: each is a block of the robust model and a series
of its own.  The shipped diurnal week cut into 6,048 pieces solves in 17 s here (one-off), so 10,000 stay within a
minute; a 1e-7 s piece of that week made 6e12 and never finished."""


def _check_piece_width(split_s: float, cost_window_s: float) -> None:
    """Refuse a piece shorter than the cost window: it holds no whole window."""
    if split_s < cost_window_s:
        raise InputError("plans.robust.split_s", split_s, f"is shorter than cost_window_s ({cost_window_s:g} s): a piece must hold at "
                         "least one cost window")


def _check_pieces(split_s: float, trace: RequestTrace) -> None:
    """Refuse more than :data:`MAX_ROBUST_PIECES` pieces of ``trace``, before any is made."""
    pieces = math.ceil(trace.span_s / split_s)
    if pieces > MAX_ROBUST_PIECES:
        raise InputError("plans.robust.split_s", split_s, f"cuts the {trace.span_s:,.0f} s trace into {pieces:,} pieces, above the limit "
                         f"of {MAX_ROBUST_PIECES:,} (each is a scenario of the robust model); take longer pieces, e.g. days (86400)")


def _scenarios(spec, loaded, trace, profile, prices, work, paygo, notes) -> tuple[Scenario, ...]:
    robust = spec.plans.robust
    tau = profile.tau_tokens_per_s_per_unit
    scenarios = []
    if robust.split_s is not None:
        piece = np.floor(trace.arrival_s / robust.split_s).astype(np.int64)
        for k in np.unique(piece).tolist():  # the pieces that hold requests, in time order
            rows = np.flatnonzero(piece == k)
            start = k * robust.split_s
            arrival = trace.arrival_s[rows] - start
            span = min(robust.split_s, trace.span_s - start) - 1e-9
            scenarios.append(Scenario(f"{_duration_label(start)}..{_duration_label(start + robust.split_s)}",
                                      window_series(arrival, work[rows], paygo[rows], tau, spec.cost_window_s, span),
                                      tuple(window_series(arrival, work[rows], paygo[rows], tau, w, span) for w in spec.windows_s)))
        if robust.split_s > trace.span_s:
            notes.append(f"plans.robust.split_s: {robust.split_s:,g} s is longer than the trace ({trace.span_s:,.0f} s): one scenario")
    for i, extra in enumerate(robust.traces):
        other = read_trace(extra, loaded.base_dir, f"plans.robust.traces[{i}]")
        _check_span(other, spec, f"plans.robust.traces[{i}]")
        other_work = profile.work(other.input_tokens, other.cached_tokens, other.output_tokens, other.thinking_tokens)
        other_paygo = prices.request_cost(other)
        scenarios.append(Scenario(f"traces[{i}]", window_series(other.arrival_s, other_work, other_paygo, tau, spec.cost_window_s),
                                  tuple(window_series(other.arrival_s, other_work, other_paygo, tau, w) for w in spec.windows_s)))
    return tuple(scenarios)


def _duration_label(seconds: float) -> str:
    return f"day {seconds / 86_400:g}" if seconds % 86_400 == 0 else f"{seconds:g} s"


def _commitment_models(spec, trace: RequestTrace, profile: Profile, prices: Prices) -> tuple[CommitmentModel, ...]:
    """One model per entry of ``plans.commitment.models`` (each serving the trace class of its name), or one model
    (the instance's profile) serving every class.  A block must hold whole cost windows (a window's units are
    its block's)."""
    commitment = spec.plans.commitment
    per_block = commitment.block_s / spec.cost_window_s
    if per_block < 1 or abs(per_block - round(per_block)) > 1e-9 * per_block:
        raise InputError("plans.commitment.block_s", commitment.block_s,
                         f"must be a whole multiple of cost_window_s ({spec.cost_window_s:g} s): a window's units are its block's")
    paygo = prices.request_cost(trace)
    if not commitment.models:
        work = profile.work(trace.input_tokens, trace.cached_tokens, trace.output_tokens, trace.thinking_tokens)
        return (CommitmentModel(profile.model, profile, window_series(trace.arrival_s, work, paygo, profile.tau_tokens_per_s_per_unit,
                                                                      spec.cost_window_s)),)
    unknown = [name for name in commitment.models if name not in trace.class_names]
    if unknown:
        raise InputError("plans.commitment.models", unknown[0], f"not a class of the trace; its classes: {', '.join(trace.class_names)}")
    unserved = [name for name in trace.class_names if name not in commitment.models]
    if unserved:
        raise InputError("plans.commitment.models", sorted(commitment.models), f"class(es) {unserved} of the trace have no model")
    models = []
    for name, model_spec in commitment.models.items():
        model_profile = resolve(model_spec, f"plans.commitment.models.{name}")
        mask = trace.class_index == trace.class_names.index(name)
        work = np.where(mask, model_profile.work(trace.input_tokens, trace.cached_tokens, trace.output_tokens, trace.thinking_tokens), 0.0)
        models.append(CommitmentModel(name, model_profile, window_series(trace.arrival_s, work, np.where(mask, paygo, 0.0),
                                                                         model_profile.tau_tokens_per_s_per_unit, spec.cost_window_s)))
    return tuple(models)


def infeasible_within_grid(problem: ReservedProblem, what: str, binding: str) -> InfeasibleError:
    """The error of a target no unit count up to ``max_units`` meets, naming the binding window or requests."""
    hint = "relax the target" if "no purchase meets it" in binding else "raise max_units or relax the target"
    return InfeasibleError(f"{what}: not met by any purchase up to max_units = {problem.max_units:,} {problem.unit_name}s "
                           f"({binding}); {hint}")
