"""Numbers for people: one way to print counts, measured values, percentages, gaps and durations in every text output.

The rules (``--json`` keeps the raw values):

* no exponent notation, ever: a count is ``180,000`` (never ``1.8e+05``), a
  measured value is rounded to its significant figures in positional form
  (``0.000123``, ``1,235``);
* a relative gap below :data:`ROUND_OFF` is solver round-off and prints as
  ``0``; a gap too small for its decimals but not zero prints ``<0.01``;
* percentages and times have fixed decimals;
* a duration is stated in the unit people read: ``0.52 s``, ``4.3 min``,
  ``2.1 h``, ``8.7 days``;
* a comparison names its direction: ``1.9 % above homogeneous``, never a
  negative ``below``.

``None`` or NaN (a missing value) prints as ``-`` everywhere.  This module is a leaf
(no optfleet imports): the solver layer's one-line summary uses it too.
"""

from __future__ import annotations

import math

MISSING = "-"
ROUND_OFF = 1e-9  # relative: gaps below this are solver round-off, printed (and reported) as 0
MAX_DECIMALS = 12  # positional form goes no finer; smaller magnitudes print as 0

MINUTE_S, HOUR_S, DAY_S = 60.0, 3_600.0, 86_400.0


def missing(value: float | None) -> bool:
    """Whether ``value`` is absent: None or NaN (printed ``-``)."""
    return value is None or value != value


def count(value: float | None) -> str:
    """A count with thousands separators, rounded to a whole number: ``180,000``."""
    if missing(value):
        return MISSING
    return f"{round(value):,}"


def significant(value: float | None, digits: int = 4) -> str:
    """``value`` to ``digits`` significant figures in positional form with thousands separators (``1,235``,
    ``12.35``, ``0.0001235``); values of ``digits`` or more integer digits are rounded to whole numbers."""
    if missing(value):
        return MISSING
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    magnitude = math.floor(math.log10(abs(value)))
    decimals = min(MAX_DECIMALS, max(0, digits - 1 - magnitude))
    text = f"{value:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def fixed(value: float | None, decimals: int = 2) -> str:
    """``value`` with exactly ``decimals`` decimals and thousands separators: ``1,234.50`` (never ``-0.00``)."""
    if missing(value):
        return MISSING
    text = f"{value:,.{decimals}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.,") else text


def percent(share: float | None, decimals: int = 1) -> str:
    """A share (0.25) as a percentage number without the sign: ``25.0``."""
    return MISSING if missing(share) else fixed(100.0 * share, decimals)


def gap_percent(gap_pct: float | None, decimals: int = 2) -> str:
    """A gap already in percent: ``0`` when it is zero (or solver round-off, below ``100 * ROUND_OFF``),
    ``<0.01`` when too small for ``decimals`` but not zero, else fixed decimals."""
    if missing(gap_pct):
        return MISSING
    if abs(gap_pct) < 100.0 * ROUND_OFF:
        return "0"
    smallest = 10.0 ** -decimals
    if abs(gap_pct) < smallest / 2:
        return f"<{smallest:.{decimals}f}" if gap_pct > 0 else f">-{smallest:.{decimals}f}"
    return fixed(gap_pct, decimals)


def relative_gap_text(gap: float | None) -> str:
    """A relative gap (0.0123) as ``1.23 %``; ``0 %`` below :data:`ROUND_OFF` (``gap 1.78e-14 %`` is round-off)."""
    return MISSING if missing(gap) else f"{gap_percent(100.0 * gap)} %"


def seconds(value_s: float | None) -> str:
    """A wall time in seconds for a ``time s`` column: three decimals under 1 s, two under 10 s, one under 100 s,
    whole seconds above (``0.004``, ``2.13``, ``12.3``, ``1,250``)."""
    if missing(value_s):
        return MISSING
    decimals = 3 if abs(value_s) < 1 else 2 if abs(value_s) < 10 else 1 if abs(value_s) < 100 else 0
    return fixed(value_s, decimals)


def duration(value_s: float | None, *, whole_seconds: bool = False) -> str:
    """A duration with its unit, in the unit people read: ``0.52 s``, ``45.2 s``, ``4.3 min``, ``2.1 h``,
    ``8.7 days`` (from two minutes, two hours, two days on); ``whole_seconds`` rounds a duration under two minutes
    to the second (``45 s``), as a progress line does."""
    if missing(value_s):
        return MISSING
    size = abs(value_s)
    for unit_s, name in ((DAY_S, "days"), (HOUR_S, "h"), (MINUTE_S, "min")):
        if size >= 2 * unit_s:
            return f"{value_s / unit_s:,.1f} {name}"
    return f"{fixed(value_s, 0 if whole_seconds else 2 if size < 10 else 1)} s"


def versus(value: float, reference: float, name: str, *, decimals: int = 1) -> str:
    """How ``value`` compares with ``reference`` in % of the reference, named by direction:
    ``27.0 % below homogeneous``, ``1.9 % above homogeneous``, ``the same as homogeneous``."""
    change = 100.0 * (value - reference) / abs(reference)
    shown = fixed(abs(change), decimals)
    if float(shown.replace(",", "")) == 0.0:
        return f"the same as {name}"
    return f"{shown} % {'above' if change > 0 else 'below'} {name}"
