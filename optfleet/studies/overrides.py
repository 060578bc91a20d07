"""A study's scenarios: the values each swept field takes, combined into one override mapping per scenario.

A swept field is a dotted path into the instance document (the same paths as
``--set`` and ``load_instance(source, a__b=value)``); its values are given as

* a comma-separated list, each item a YAML scalar: ``100,1000,10000``,
  ``fleetsim_compatible,paper``, ``[a.csv,b.csv],[c.csv]`` (commas inside
  brackets, braces or quotes do not split);
* or a range ``start:stop:step`` of numbers, ``start + i * step`` for
  ``i = 0, 1, ...`` up to ``stop``, which is included when it lands on the
  grid (``200:1000:100`` is 200, 300, ..., 1000; ``0:1:0.3`` is 0, 0.3,
  0.6, 0.9).  Ranges are computed in decimal, so ``0.1:0.5:0.1`` ends at 0.5.

Scenarios are the Cartesian product of the fields' values (the first field
varies slowest) or, zipped, the i-th value of every field.  Each scenario is
validated against the kind's schema before any work
(:func:`validate_scenarios`): a bad path or value is an
:class:`~optfleet.errors.InputError` naming the field, the value and the
scenario.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from optfleet.errors import InputError, short_repr
from optfleet.instance.documents import parse_yaml
from optfleet.instance.loader import LoadedInstance, load_instance

Scenario = dict[str, Any]  # dotted field path -> value
MAX_SCENARIOS = 1_000_000  # a larger study is a typo (a range step too small), refused before any work
_NUMBER = r"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*"
_RANGE = re.compile(rf"^({_NUMBER}):({_NUMBER}):({_NUMBER})$")
_OPENING, _CLOSING = "[{", "]}"
_INDEX = re.compile(r"\[(\d+)\]")


def split_assignment(item: str, usage: str) -> tuple[str, str]:
    """``FIELD=TEXT`` of a ``--set`` option as the field path and the text (``usage``, the expected form, goes in
    the message when the item is not of that form)."""
    field, sep, text = item.partition("=")
    if not sep or not field.strip() or not text.strip():
        raise InputError("--set", item, f"expected {usage}")
    field = _INDEX.sub(r".\1", field.strip())  # constraints[0].kind reads as constraints.0.kind
    if any(not part for part in field.split(".")):
        raise InputError("--set", item, "the field path has an empty part (two dots, or a dot at an end)")
    return field, text


def yaml_value(text: str, field: str, item: str) -> Any:
    """``text`` parsed as YAML for ``field``; ``item`` is the ``--set`` option named when it is not YAML."""
    import yaml

    try:
        return parse_yaml(text, field)
    except (yaml.YAMLError, RecursionError):
        raise InputError("--set", item, "the value is not valid YAML") from None


def parse_axis(item: str) -> tuple[str, list[Any]]:
    """``FIELD=VALUES`` of ``sweep --set`` (module docstring) as the field path and its list of values."""
    field, text = split_assignment(item, "FIELD=VALUES, e.g. --set workload.rate_rps=100,1000 or --set slo.ttft_p99_ms=200:1000:100")
    return field, axis_values(field, text)


def axis_values(field: str, text: str) -> list[Any]:
    """The values ``text`` names for ``field``: a ``start:stop:step`` range or a comma-separated list of YAML scalars."""
    bounds = _RANGE.match(text)
    values = _range(field, text, *bounds.groups()) if bounds else [yaml_value(item.strip(), field, f"{field}={text}") for item in _split_list(field, text)]
    if any(value is None for value in values):
        raise InputError(field, text, "null is not a value a field can be swept to (an override of null is ignored)")
    return values


def _range(field: str, text: str, start_text: str, stop_text: str, step_text: str) -> list[int | float]:
    """``start, start + step, ...`` up to ``stop`` (included when on the grid), in decimal arithmetic; integers when
    all three bounds are integers."""
    start, stop, step = (Decimal(t.strip()) for t in (start_text, stop_text, step_text))  # numbers: _RANGE matched them
    try:
        steps = (stop - start) / step if step != 0 else Decimal(-1)
        if steps < 0:
            raise InputError(field, text, "the range is empty: the step must be non-zero and lead from start to stop")
        if steps >= MAX_SCENARIOS:
            raise InputError(field, text, f"the range has more than {MAX_SCENARIOS:,} values")
        values = [start + i * step for i in range(int(steps) + 1)]
    except ArithmeticError:
        raise InputError(field, text, "the numbers are beyond the range of decimal arithmetic") from None
    integral = all(t.strip().lstrip("+-").isdigit() for t in (start_text, stop_text, step_text))
    return [int(v) if integral else float(v) for v in values]


def _split_list(field: str, text: str) -> list[str]:
    """``text`` split at commas outside brackets, braces and quotes (a YAML flow list is one item)."""
    items, depth, quote, current = [], 0, "", []
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in _OPENING:
            depth += 1
        elif char in _CLOSING:
            depth -= 1
        elif char == "," and depth == 0:
            items.append("".join(current))
            current = []
            continue
        current.append(char)
    items.append("".join(current))
    if any(not item.strip() for item in items):
        raise InputError(field, text, "the list has an empty item (two commas, or a comma at an end)")
    return items


def scenarios(axes: Mapping[str, Sequence[Any]], *, zipped: bool = False) -> list[Scenario]:
    """One override mapping per scenario: the Cartesian product of ``axes`` (first field slowest), or with
    ``zipped`` the i-th value of every field (all lists of one length)."""
    if not axes:
        raise InputError("--set", None, "name at least one field to sweep, e.g. --set workload.rate_rps=100,1000")
    fields = list(axes)
    empty = [f for f in fields if not axes[f]]
    if empty:
        raise InputError(empty[0], [], "give at least one value")
    if zipped:
        lengths = {f: len(axes[f]) for f in fields}
        if len(set(lengths.values())) > 1:
            raise InputError("--zip", lengths, "zipped fields need value lists of one length")
        rows = zip(*(axes[f] for f in fields), strict=True)
    else:
        count = 1
        for f in fields:
            count *= len(axes[f])
        if count > MAX_SCENARIOS:
            raise InputError("--set", {f: len(axes[f]) for f in fields}, f"the product has {count:,} scenarios, more than {MAX_SCENARIOS:,}")
        rows = itertools.product(*(axes[f] for f in fields))
    return [dict(zip(fields, row, strict=True)) for row in rows]


def keywords(scenario: Scenario) -> dict[str, Any]:
    """A scenario as keyword overrides of the API and the loader (``a.b`` -> ``a__b``)."""
    return {field.replace(".", "__"): value for field, value in scenario.items()}


def describe(index: int, scenario: Scenario) -> str:
    """``scenario 3 (workload.rate_rps=1000, slo.ttft_p99_ms=300)``: how messages name a scenario."""
    return f"scenario {index} ({', '.join(f'{field}={short_repr(value)}' for field, value in scenario.items())})"


def validate_scenarios(base: LoadedInstance, study: Sequence[Scenario]) -> None:
    """Validate every scenario against the kind's schema (no preparation, no solving); the first bad one raises an
    InputError naming its field, its value and the scenario."""
    for index, scenario in enumerate(study):
        try:
            load_instance(base, **keywords(scenario))
        except InputError as exc:
            raise InputError(exc.field, exc.value, f"{exc.problem} (in {describe(index, scenario)})") from None
