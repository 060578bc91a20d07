"""Plain-text tables and pages for people, the same for every kind and command, fitted to the output width.

A report is a *page*: a list of blocks, each a line of prose (``str``) or a
:class:`Table`.  :func:`page` renders it at the output width
(:func:`output_width`, 120 characters unless the caller says otherwise; None
is ``--wide``):

* a table wider than the width hides its least important columns, one at a
  time, until it fits: every :class:`Column` declares its importance
  (``KEY`` columns are never hidden: a comparison's method, status,
  objective, bound and gap; a plan's identifying columns), the lowest goes
  first and, among equals, the rightmost.  One line under the table names
  the hidden columns and ``--wide``;
* a prose line longer than the width wraps at a space, its continuation lines
  indented four more than the line itself;
* with no width (``--wide``) nothing is hidden or wrapped.

Numbers are formatted by :mod:`optfleet.numbers` (``-`` for a missing value,
no exponent notation); every numeric column's heading carries its unit
(``time s``, ``P99 TTFT ms``, ``cost $/h``).  ``--json`` never goes through
here: it is always complete.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from optfleet import numbers
from optfleet.results import format_cost

if TYPE_CHECKING:
    from optfleet.api import GapOutcome

Formatter = Callable[[Any], str]

DEFAULT_WIDTH = 120  # characters: tables and prose fit this unless --wide (or a narrower terminal)
COLUMN_GAP = "  "
CONTINUATION_INDENT = "    "  # a wrapped prose line's continuation lines, beyond the line's own indent

# How long a column stays when a table must shrink: the lowest goes first; KEY never goes.
LOW, MEDIUM, HIGH, KEY = 0, 1, 2, 3

_WIDTH: ContextVar[int | None] = ContextVar("optfleet_output_width", default=DEFAULT_WIDTH)


@contextmanager
def output_width(width: int | None) -> Iterator[None]:
    """Render pages inside the block at ``width`` characters (None: every column, no wrapping, as ``--wide``)."""
    token = _WIDTH.set(width)
    try:
        yield
    finally:
        _WIDTH.reset(token)


def current_width() -> int | None:
    """The width pages are rendered at now (:func:`output_width`; :data:`DEFAULT_WIDTH` unless set)."""
    return _WIDTH.get()


def display_width(wide: bool, stream: TextIO) -> int | None:
    """The CLI's width: None with ``--wide``; else :data:`DEFAULT_WIDTH`, or the terminal's width when ``stream`` is a
    terminal narrower than that (a pipe or a file always gets :data:`DEFAULT_WIDTH`, so output does not depend on
    where it was run)."""
    if wide:
        return None
    if not stream.isatty():
        return DEFAULT_WIDTH
    return min(DEFAULT_WIDTH, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


# Cell formatters: value -> text, "-" for a missing value (optfleet.numbers).
def text(value: Any) -> str:
    """A label as it is; ``-`` for None or an empty string."""
    return numbers.MISSING if value is None or value == "" else str(value)


def value(value: Any) -> str:
    """A cell of any type: a whole number as a count, another number to six significant figures, else a label."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return text(value)
    return numbers.count(value) if isinstance(value, int) else numbers.significant(value, 6)


count: Formatter = numbers.count  # a whole number with separators (``180,000``)


def number(digits: int = 4) -> Formatter:
    """A measured value to ``digits`` significant figures, positional (``1,235``, ``0.01235``)."""
    return lambda value: numbers.significant(value, digits)


def fixed(decimals: int = 2) -> Formatter:
    """A value with ``decimals`` fixed decimals (``1,234.50``)."""
    return lambda value: numbers.fixed(value, decimals)


def percent(decimals: int = 1) -> Formatter:
    """A share (0.25) as a percentage number, for a ``... %`` column (``25.0``)."""
    return lambda value: numbers.percent(value, decimals)


@dataclass(frozen=True)
class Column:
    """One column: the row key it shows, its heading (with the unit of a numeric column), how a cell is printed and
    how long it stays when the table must shrink (``KEY`` columns never go; then ``HIGH``, ``MEDIUM``, ``LOW``)."""

    key: str
    heading: str
    format: Formatter = text
    keep: int = MEDIUM


@dataclass(frozen=True)
class Table:
    """Rows (mappings) shown in ``columns``; a row without a column's key shows ``-``."""

    columns: Sequence[Column]
    rows: Sequence[Mapping[str, Any]]


Block = str | Table

NUMERIC_CELL = re.compile(r"^[-+<>~]?\$?\d")


def _right_aligned(cells: Sequence[str]) -> bool:
    """Numbers are right-aligned, labels left: a column is numeric when each of its cells is (or is missing; a column
    of missing values only is aligned as numbers are)."""
    return all(NUMERIC_CELL.match(c) for c in cells if c != numbers.MISSING)


def fitted_columns(headings: Sequence[str], cells: Sequence[Sequence[str]], keep: Sequence[int], width: int | None) -> list[int]:
    """The indices of the columns shown at ``width``: all when they fit (or no width); else the least important ones
    go first (among equals, the rightmost), never a ``KEY`` one, until the rest fits or only ``KEY`` ones are left."""
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(headings)]
    shown = list(range(len(headings)))

    def total() -> int:
        return sum(widths[i] for i in shown) + len(COLUMN_GAP) * (len(shown) - 1)

    if width is None:
        return shown
    for i in sorted((i for i in shown if keep[i] < KEY), key=lambda i: (keep[i], -i)):
        if total() <= width:
            break
        shown.remove(i)
    return shown


def render_lines(table: Table, width: int | None) -> list[str]:
    """The table's lines at ``width`` characters (None: every column), then the line naming the hidden columns."""
    headings = [c.heading for c in table.columns]
    cells = [[c.format(row.get(c.key)) for c in table.columns] for row in table.rows]
    shown = fitted_columns(headings, cells, [c.keep for c in table.columns], width)
    formatted = []
    for column in ([headings[i], *(row[i] for row in cells)] for i in shown):
        size = max(len(v) for v in column)
        align = str.rjust if _right_aligned(column[1:]) else str.ljust
        formatted.append([align(v, size) for v in column])
    lines = [COLUMN_GAP.join(line).rstrip() for line in zip(*formatted, strict=True)]
    hidden = [headings[i] for i in range(len(headings)) if i not in shown]
    if hidden:
        lines += wrap(f"({len(hidden)} column{'s' if len(hidden) > 1 else ''} hidden to fit {width} characters: "
                      f"{', '.join(hidden)}; --wide shows every column)", width)
    return lines


def wrap(line: str, width: int | None) -> list[str]:
    """``line`` wrapped at spaces to ``width`` (None: not wrapped), continuation lines indented four more than the
    line; a word longer than the width stays whole."""
    if width is None or len(line) <= width:
        return [line]
    indent = line[: len(line) - len(line.lstrip(" "))]
    return textwrap.wrap(line.strip(" "), width, initial_indent=indent, subsequent_indent=indent + CONTINUATION_INDENT,
                         break_long_words=False, break_on_hyphens=False) or [line]


def page(blocks: Iterable[Block]) -> str:
    """The blocks as one text at the current width: prose lines wrapped (a block may hold several lines), tables
    fitted (module docstring)."""
    width = current_width()
    lines: list[str] = []
    for block in blocks:
        if isinstance(block, Table):
            lines += render_lines(block, width)
        else:
            for line in block.split("\n"):
                lines += wrap(line, width)
    return "\n".join(lines)


# The comparison table every kind shares: core columns first, then the kind's own.
def objective_number(value: Any, unit: str) -> str:
    """An objective's number in ``unit``: costs ($/h) to the cent, others to one decimal from 1,000 on, else six
    significant figures (``1,081,920.8``, ``17.0516``)."""
    if value is None:
        return numbers.MISSING
    if unit == "$/h":
        return numbers.fixed(value, 2)
    return numbers.fixed(value, 1) if abs(value) >= 1000 else numbers.significant(value, 6)


def objective(value: Any, unit: str) -> str:
    """An objective with its unit, for a cell whose heading does not carry it: ``$1,234.56/h``, ``12.5 ms``."""
    if value is None:
        return numbers.MISSING
    return format_cost(value) if unit == "$/h" else f"{objective_number(value, unit)} {unit}".rstrip()


def comparison_table(rows: Sequence[Mapping[str, Any]], extra: Sequence[Column] = (), lead: Sequence[Column] = ()) -> Table:
    """The rows of :func:`optfleet.results.comparison_rows` with ``lead``, the core columns (method, status, feasible,
    objective and bound, gap %, time s), then ``extra``.  The objective's unit goes in the objective and bound
    headings when the rows share it, else into each cell (the bound in the row's unit)."""
    units = {row.get("objective_unit", "") for row in rows}
    if len(units) == 1:
        unit = units.pop()
        label = f" {unit}" if unit else ""
        values = [Column(key, f"{key}{label}", lambda v, unit=unit: objective_number(v, unit), KEY) for key in ("objective", "bound")]
    else:
        rows = [{**row, **{key: objective(row[key], row.get("objective_unit", "")) for key in ("objective", "bound")}} for row in rows]
        values = [Column(key, key, text, KEY) for key in ("objective", "bound")]
    core = [
        Column("method", "method", text, KEY),
        Column("status", "status", text, KEY),
        Column("feasible", "feasible", lambda v: text(v) if v is None or isinstance(v, str) else "yes" if v else "no", HIGH),
        *values,
        Column("gap_pct", "gap %", numbers.gap_percent, KEY),
        Column("seconds", "time s", numbers.seconds, MEDIUM),
    ]
    return Table([*lead, *core, *extra], rows)


def notes(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """``  method: note`` for every row with a note (why no plan, what a plan breaks)."""
    return [f"  {row['method']}: {row['note']}" for row in rows if row.get("note")]


def single_group_gap(outcome: "GapOutcome", extra: Sequence[Column], head: Sequence[str] = ()) -> str:
    """The ``gap`` page of a kind whose rows form one group: the bound's reason, ``head`` (the kind's lines about the
    instance), the table, the notes, and the mixed-vs-best-single-type line when the kind's summary has one."""
    (reference,) = outcome.references.values()
    name = outcome.loaded.instance.spec.name
    blocks: list[Block] = [f"instance {name}: gap = distance to the bound in % of the bound; bound: {reference.reason}", *head, "",
                           comparison_table(outcome.rows, extra), *notes(outcome.rows)]
    mixed = (outcome.summary or {}).get("mixed_vs_best_single_type")
    if mixed is not None:
        blocks.append(f"mixed fleet {format_cost(mixed['mixed_cost_per_hour'])} vs best single type {mixed['best_single_type']} "
                      f"{format_cost(mixed['best_single_cost_per_hour'])}: {numbers.fixed(mixed['savings_pct'], 2)} % saved")
    return page(blocks)
