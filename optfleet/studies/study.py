"""A study: an instance, the scenarios of its swept fields and the methods, planned (validated) before it runs.

:func:`plan_study` checks everything that can be checked before any solve:
the engine and its options, the results file, the base instance (loaded and
prepared once), the methods (default: the base instance's gap set, so every
scenario runs the same ones) and every scenario against the kind's schema.
:func:`run_study` solves the scenarios the results file does not hold yet on
the chosen engine, with one progress line (done, failed, rate, time left),
writes the table every :data:`CHECKPOINT_S` seconds and at the end (also when
interrupted, so a rerun resumes), and returns it in scenario order.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optfleet import api
from optfleet.errors import InputError
from optfleet.instance.loader import LoadedInstance
from optfleet.progress import Progress, silent
from optfleet.studies import table
from optfleet.studies.engines import CONNECT_TIMEOUT_S, check_engine, run_scenarios
from optfleet.studies.overrides import Scenario, axis_values, scenarios, validate_scenarios
from optfleet.studies.scenario import FAILED_STATUSES

if TYPE_CHECKING:
    import pandas as pd

CHECKPOINT_S = 30.0  # a long study writes its table this often, so an interrupted run loses little


@dataclass(frozen=True)
class Study:
    """A validated study, ready to run (module docstring)."""

    base: LoadedInstance
    kind: str
    scenarios: tuple[Scenario, ...]
    methods: tuple[str, ...]
    engine: str
    workers: int | None
    scheduler: str | None
    out: Path | None
    previous: tuple[table.Row, ...]
    connect_timeout_s: float = CONNECT_TIMEOUT_S

    @property
    def pending(self) -> list[tuple[int, Scenario]]:
        """The scenarios (with their index) the results file has no complete rows for."""
        done = table.done_keys(self.previous, self.methods)
        return [(i, s) for i, s in enumerate(self.scenarios) if table.scenario_key(s) not in done]


def plan_study(source: "api.Source", axes: Mapping[str, Sequence[Any] | str], methods: Sequence[str] | str | None = None, *,
               zipped: bool = False, engine: str = "local", workers: int | None = None, scheduler: str | None = None,
               connect_timeout_s: float | None = None, out: str | Path | None = None, **overrides: Any) -> Study:
    """Validate a study (module docstring): ``axes`` maps each swept field (dotted path) to its values, a list or
    the CLI's text (``"100,1000"``, ``"200:1000:100"``); ``overrides`` apply to every scenario (``preset=...``,
    ``time_limit_s=...``, dotted paths with ``__``)."""
    connect_timeout_s = CONNECT_TIMEOUT_S if connect_timeout_s is None else connect_timeout_s
    check_engine(engine, workers, scheduler, connect_timeout_s)
    path = None if out is None else table.check_path(out)
    loaded = api.load(source, **overrides)
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    names = tuple(dict.fromkeys(methods)) if methods else tuple(loaded.kind.gap_methods(loaded.problem))
    if not names:
        raise InputError("--methods", methods, f"no method named; known: {', '.join(loaded.kind.methods(loaded.problem))}")
    api.check_methods(loaded.kind, loaded.problem, names, "--methods")
    api.check_solver(loaded)
    values = {field: axis_values(field, given) if isinstance(given, str) else list(given) for field, given in axes.items()}
    study = scenarios(values, zipped=zipped)
    validate_scenarios(loaded.instance, study)
    previous = () if path is None else tuple(table.previous_rows(path))
    return Study(loaded.instance, loaded.kind.name, tuple(study), names, engine, workers, scheduler, path, previous, connect_timeout_s)


def run_study(study: Study, progress: Progress = silent) -> "pd.DataFrame":
    """Solve the pending scenarios of ``study`` and return its table (module docstring); ``frame.attrs`` holds the
    instance, the kind, the methods and the counts of scenarios solved now, resumed from the file and failed."""
    pending = study.pending
    solved: dict[int, list[dict[str, Any]]] = {}
    failed, last_write = 0, time.monotonic()
    progress("0 failed", 0, len(pending))
    try:
        for index, rows in run_scenarios(study.base, pending, study.methods, engine=study.engine, workers=study.workers,
                                         scheduler=study.scheduler, connect_timeout_s=study.connect_timeout_s):
            solved[index] = rows
            failed += any(row["status"] in FAILED_STATUSES for row in rows)
            progress(f"{failed} failed", len(solved), len(pending))
            if study.out is not None and time.monotonic() - last_write >= CHECKPOINT_S:
                table.write_table(table.assemble(study.scenarios, solved, study.previous), study.out)
                last_write = time.monotonic()
    finally:
        frame = table.assemble(study.scenarios, solved, study.previous)
        if study.out is not None and solved:
            table.write_table(frame, study.out)
    frame.attrs.update(instance=study.base.spec.name, kind=study.kind, methods=list(study.methods), scenarios=len(study.scenarios),
                       solved=len(solved), resumed=len(study.scenarios) - len(pending), failed=failed)
    return frame
