"""Each model's arrival rate per period: a forecast table (CSV or Parquet), a diurnal/weekly generator, or request
traces binned by period.

Each gives an array ``rate_rps[m, t]`` over the models (instance order) and the ``T`` periods of the horizon.  A
forecast must name every model in every period exactly once: a period left out is a gap in the demand, refused
rather than read as zero; so is a trace that ends before the horizon's last period begins.  A trace's period ``t``
holds the requests arriving in ``[t P, (t + 1) P)`` seconds after its first request (``P`` the period's seconds);
its rate is their count over ``P``, and requests after the horizon are left out.  Any source is then grown by
``demand.growth_per_day`` (:func:`grown`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.instance.data_files import BINARY_SUFFIXES, refuse_cells, require_data_file
from optfleet.problems.capacity_plan.schema import GeneratedDemandSpec
from optfleet.problems.reserved.schema import TraceSpec

FORECAST_COLUMNS = ("period", "model", "rate_rps")
HOURS_PER_DAY = 24.0
SECONDS_PER_HOUR = 3600.0
WEEKEND_DAYS = (5, 6)  # Saturday and Sunday, with period 0 starting Monday 00:00


def generated_rates(generator: Mapping[str, GeneratedDemandSpec], models: Sequence[str], periods: int, period_hours: float,
                    field: str = "demand.generator") -> NDArray[np.float64]:
    """``rate[m, t] = mean (1 + a cos(2 pi (h_t - peak) / 24)) w_t`` with ``h_t`` the hour of day at the middle of
    period ``t`` and ``w_t`` the weekend factor on Saturdays and Sundays, else 1 (schema.GeneratedDemandSpec)."""
    _same_models(set(generator), models, field)
    middle_h = (np.arange(periods) + 0.5) * period_hours
    hour_of_day = np.mod(middle_h, HOURS_PER_DAY)
    weekend = np.isin(np.floor(middle_h / HOURS_PER_DAY).astype(np.int64) % 7, WEEKEND_DAYS)
    rows = []
    for name in models:
        g = generator[name]
        daily = 1.0 + g.daily_amplitude * np.cos(2.0 * math.pi * (hour_of_day - g.peak_hour) / HOURS_PER_DAY)
        rows.append(g.mean_rps * daily * np.where(weekend, g.weekend_factor, 1.0))
    return np.maximum(np.array(rows, dtype=np.float64), 0.0)


def grown(rates_rps: NDArray[np.float64], growth_per_day: float, period_hours: float) -> NDArray[np.float64]:
    """``rate[m, t] (1 + g)^(t period_hours / 24)``: every model's rate grown by ``g`` a day from period 0's start."""
    return rates_rps * (1.0 + growth_per_day) ** (np.arange(rates_rps.shape[1]) * period_hours / HOURS_PER_DAY)[None, :]


def read_forecast(path: Path, models: Sequence[str], periods: int, field: str = "demand.forecast_file") -> NDArray[np.float64]:
    """The table's ``rate_rps`` as ``rate[m, t]``; an InputError names the column, the cell or the missing period."""
    import pandas as pd

    require_data_file(path, field)
    try:
        frame = pd.read_parquet(path) if path.suffix.lower() in BINARY_SUFFIXES else pd.read_csv(path)
    except (ValueError, OSError, UnicodeDecodeError) as exc:  # pandas' parser errors are ValueErrors
        raise InputError(field, str(path), f"cannot be read as a table: {exc}") from None
    missing = [c for c in FORECAST_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(field, str(path), f"has no column {', '.join(missing)} (columns needed: {', '.join(FORECAST_COLUMNS)})")
    period = pd.to_numeric(frame["period"], errors="coerce")
    refuse_cells(f"{field}:period", frame["period"], ~(period.notna() & (period % 1 == 0) & (period >= 0) & (period < periods)).to_numpy(),
                 f"is not a period of the horizon (a whole number from 0 to {periods - 1})", path)
    rate = pd.to_numeric(frame["rate_rps"], errors="coerce")
    refuse_cells(f"{field}:rate_rps", frame["rate_rps"], ~(rate.notna() & np.isfinite(rate) & (rate >= 0)).to_numpy(),
                 "is not a finite rate >= 0 (requests per second)", path)
    names = frame["model"].astype(str)
    refuse_cells(f"{field}:model", names, ~names.isin(models).to_numpy(), f"is not a model of the instance ({', '.join(models)})", path)
    keys = names + "@" + period.astype(np.int64).astype(str)
    refuse_cells(f"{field}:period", frame["period"], keys.duplicated().to_numpy(), "repeats a (model, period) row", path)
    rates = np.full((len(models), periods), np.nan)
    rates[[models.index(n) for n in names], period.astype(np.int64).to_numpy()] = rate.to_numpy(dtype=np.float64)
    gaps = np.argwhere(np.isnan(rates))
    if len(gaps):
        m, t = gaps[0]
        raise InputError(f"{field}:period", int(t), f"model {models[m]} has no rate in this period ({len(gaps)} (model, period) "
                         f"pairs missing of {rates.size}): the forecast must cover every period of the horizon")
    return rates


def trace_rates(traces: Mapping[str, TraceSpec], models: Sequence[str], periods: int, period_hours: float, base_dir: Path,
                field: str = "demand.traces") -> NDArray[np.float64]:
    """``rate[m, t] = #{requests of model m's trace arriving in period t} / period_s`` (module docstring); the traces
    are read by the reserved kind's reader (optfleet/problems/reserved/trace.py)."""
    from optfleet.problems.reserved.trace import read_trace

    _same_models(set(traces), models, field)
    period_s = period_hours * SECONDS_PER_HOUR
    rates = np.zeros((len(models), periods))
    for m, name in enumerate(models):
        arrival_s = read_trace(traces[name], base_dir, f"{field}.{name}").arrival_s
        if len(arrival_s) == 0 or arrival_s[-1] < (periods - 1) * period_s:
            span_h = float(arrival_s[-1]) / SECONDS_PER_HOUR if len(arrival_s) else 0.0
            raise InputError(f"{field}.{name}", traces[name].file, f"spans {span_h:.4g} h, which ends before the horizon's last period "
                             f"starts ({(periods - 1) * period_hours:g} h): the periods after it would have no demand")
        counts = np.bincount(np.floor(arrival_s / period_s).astype(np.int64), minlength=periods)[:periods]
        rates[m] = counts / period_s
    return rates


def _same_models(given: set[str], models: Sequence[str], field: str) -> None:
    unknown = sorted(given - set(models))
    if unknown:
        raise InputError(f"{field}.{unknown[0]}", unknown[0], f"is not a model of the instance ({', '.join(models)})")
    absent = [m for m in models if m not in given]
    if absent:
        raise InputError(field, sorted(given), f"has no demand for model {absent[0]}")
