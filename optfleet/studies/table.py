"""A study's one tidy table: one row per scenario and method, the scenario's overrides as columns, then the gap rows.

Columns: every swept field (its dotted path; a list or mapping value as JSON
text), then the core result columns and the kind's own (the rows the API's
``gap`` produces), then ``error`` (empty unless the scenario failed) and
``overrides``, the scenario's key: its overrides as canonical JSON.  A
scenario is done when the table has a row of its key for every method asked
for, so rerunning a study with the same ``--out`` skips it (resumption).

Files are Parquet (``.parquet``, needs the ``parquet`` extra) or CSV
(``.csv``), by extension, written atomically (a temporary file renamed).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optfleet.errors import InputError
from optfleet.instance.data_files import require_data_file
from optfleet.studies.overrides import Scenario

if TYPE_CHECKING:
    import pandas as pd

KEY = "overrides"  # the column holding a scenario's key
LAST_COLUMNS = ("note", "error", KEY)
SUFFIXES = (".parquet", ".csv")
Row = dict[str, Any]


def scenario_key(scenario: Scenario) -> str:
    """A scenario's key: its overrides as canonical JSON (sorted fields)."""
    return json.dumps(scenario, sort_keys=True, default=str)


def scenario_rows(scenario: Scenario, rows: Sequence[Mapping[str, Any]]) -> list[Row]:
    """``rows`` of one scenario with its override columns in front and its key at the end."""
    columns = {field: value if _is_scalar(value) else json.dumps(value, default=str) for field, value in scenario.items()}
    return [{**columns, **row, KEY: scenario_key(scenario)} for row in rows]


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool))


def check_path(path: str | Path, option: str = "--out") -> Path:
    """A results file name: ``.parquet`` (with pyarrow installed) or ``.csv``; refused before any work otherwise."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES or path.is_dir():
        raise InputError(option, str(path), f"give a results file name ending in {' or '.join(SUFFIXES)}")
    if path.suffix.lower() == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise InputError(option, str(path), "Parquet needs pyarrow: pip install 'optfleet[parquet]' (or name a .csv file)") from None
    return path


def read_table(path: str | Path, option: str = "FILE") -> "pd.DataFrame":
    """A results file (Parquet or CSV by extension) as a DataFrame; a missing or unreadable file is an InputError."""
    import pandas as pd

    path = check_path(path, option)
    if not path.is_file():
        raise InputError(option, str(path), "no such results file")
    require_data_file(path, option)
    try:
        return pd.read_parquet(path) if path.suffix.lower() == ".parquet" else pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise InputError(option, str(path), f"cannot be read as a {path.suffix[1:]} table ({' '.join(str(exc).split())})") from None


def previous_rows(path: Path) -> list[Row]:
    """The rows of an earlier run of the study in ``path`` (none if the file does not exist yet)."""
    if not path.exists():
        return []
    frame = read_table(path, "--out")
    if KEY not in frame.columns or "method" not in frame.columns:
        raise InputError("--out", str(path), f"is not a sweep results file (it has no {KEY!r} and 'method' columns); name another file")
    return records(frame)


def records(frame: "pd.DataFrame") -> list[Row]:
    """The rows of ``frame`` as dicts of plain values, missing values as None."""
    from optfleet.results import json_safe

    plain = frame.astype(object).where(frame.notna(), None)
    return [json_safe(row) for row in plain.to_dict("records")]


def done_keys(rows: Sequence[Mapping[str, Any]], methods: Sequence[str]) -> set[str]:
    """The keys of the scenarios that have a row for every method of ``methods``."""
    seen: dict[str, set[str]] = {}
    for row in rows:
        seen.setdefault(row[KEY], set()).add(row["method"])
    return {key for key, names in seen.items() if set(methods) <= names}


def assemble(study: Sequence[Scenario], solved: Mapping[int, Sequence[Mapping[str, Any]]], previous: Sequence[Row]) -> "pd.DataFrame":
    """The study's table in scenario order: a scenario solved now gets its new rows (then any earlier rows of
    methods not run now), else its earlier rows; rows of scenarios outside this study stay, at the end."""
    import pandas as pd

    earlier: dict[str, list[Row]] = {}
    for row in previous:
        earlier.setdefault(row[KEY], []).append(row)
    rows: list[Row] = []
    for index, scenario in enumerate(study):
        old = earlier.pop(scenario_key(scenario), [])
        if index in solved:
            new = scenario_rows(scenario, solved[index])
            ran = {row["method"] for row in new}
            old = new + [row for row in old if row["method"] not in ran]
        rows += old
    rows += [row for group in earlier.values() for row in group]
    frame = pd.DataFrame(rows)
    last = [c for c in LAST_COLUMNS if c in frame.columns]  # whichever scenario's rows came first (a row without a plan has fewer)
    return _uniform(frame[[c for c in frame.columns if c not in last] + last].convert_dtypes())


def _uniform(frame: "pd.DataFrame") -> "pd.DataFrame":
    """Columns mixing value types (``--set x=1,abc``) as text, so every column has one type in Parquet."""
    import pandas as pd

    for column in frame.columns:
        if frame[column].dtype == object and frame[column].dropna().map(type).nunique() > 1:
            frame[column] = frame[column].map(lambda v: None if v is None or v is pd.NA else str(v)).astype("string")
    return frame


def write_table(frame: "pd.DataFrame", path: Path) -> None:
    """Write ``frame`` to ``path`` (Parquet or CSV by extension) through a temporary file, renamed when complete."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    if path.suffix.lower() == ".parquet":
        frame.to_parquet(partial, index=False)
    else:
        frame.to_csv(partial, index=False)
    os.replace(partial, path)
