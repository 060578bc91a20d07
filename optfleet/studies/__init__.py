"""Scenario studies: one instance solved over a grid of field values, on this machine or a Dask cluster.

    import optfleet
    table = optfleet.sweep("instances/fleet/azure_2023.yaml", {"workload.rate_rps": "250:1000:250"}, methods="sweep,homogeneous")

``optfleet sweep`` is the same on the command line.  The modules:
``overrides`` (swept values and scenarios, validated up front), ``scenario``
(one scenario through the API's gap), ``engines`` (serial, a local process
pool, Dask), ``table`` (the tidy table, its files and resumption), ``study``
(planning and running a study), ``plot`` (a result column against a swept
one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optfleet.progress import Progress, silent

if TYPE_CHECKING:
    import pandas as pd

    from optfleet.api import Source


def sweep(source: "Source", axes: Mapping[str, Sequence[Any] | str], methods: Sequence[str] | str | None = None, *,
          zipped: bool = False, engine: str = "local", workers: int | None = None, scheduler: str | None = None,
          connect_timeout_s: float | None = None, out: str | Path | None = None, progress: Progress = silent, **overrides: Any) -> "pd.DataFrame":
    """Solve ``source`` for every scenario of ``axes`` (field path -> values: a list, or the CLI's text
    ``"100,1000"`` / ``"200:1000:100"``) with ``methods`` (default: the instance's gap set) and return the tidy
    table, one row per scenario and method in scenario order.  With ``out`` (``.parquet`` or ``.csv``) the table
    is written there and scenarios it already holds are not solved again.  ``engine``: ``local`` (a process pool
    of ``workers``, default min(cores, scenarios)), ``serial`` or ``dask`` (``scheduler`` address, reached within
    ``connect_timeout_s``, default 10 s, or a local cluster of ``workers``).  ``overrides`` apply to every scenario, as in :func:`optfleet.api.run_gap`."""
    from optfleet.studies.study import plan_study, run_study

    study = plan_study(source, axes, methods, zipped=zipped, engine=engine, workers=workers, scheduler=scheduler,
                       connect_timeout_s=connect_timeout_s, out=out, **overrides)
    return run_study(study, progress)
