"""Where a study's scenarios run: in this process, on a local process pool, or on a Dask cluster.

Every engine yields ``(scenario index, rows)`` in completion order (the study
puts rows back in scenario order).  No engine starts a process per scenario,
and the pool and Dask send scenarios in batches (:func:`batches`), so the cost
of a task (sending it, scheduling it, returning its rows) is paid about
:data:`TASKS_PER_WORKER` times a worker, not once a scenario:

* ``serial``: one after the other in this process;
* ``local``: a ``ProcessPoolExecutor`` of ``workers`` processes; each loads
  the base instance once (its initializer) and solves many scenarios.  The
  workers are forked from a fresh server process (``forkserver``; ``spawn``
  where there is none), never from this one: this process may hold threads
  and their locks (a Dask client's, HiGHS's), and a forked copy waits on
  them forever (seen: a pool forked after a Dask study and a HiGHS solve
  in the same process hung);
* ``dask``: a Dask ``distributed`` cluster, the one at ``scheduler``
  (``tcp://host:8786``; batches are sized by its workers at the start) or a
  ``LocalCluster`` of ``workers`` one-thread worker processes; the base
  instance is sent to every worker once.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterator, Sequence
from typing import Any

from optfleet.errors import InputError
from optfleet.instance.loader import LoadedInstance
from optfleet.studies.overrides import Scenario
from optfleet.studies.scenario import solve_batch, solve_scenario

ENGINES = ("local", "serial", "dask")
# Tasks a worker gets, about: few enough that dispatch costs little next to the work (a fleet-sweep scenario takes
# about 15 ms, a Dask task costs milliseconds of scheduler and messaging), enough to balance the load at the end and
# to move the progress line.
TASKS_PER_WORKER = 8
Completed = Iterator[tuple[int, list[dict[str, Any]]]]


def available_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def check_engine(engine: str, workers: int | None, scheduler: str | None) -> None:
    """Refuse, before any work, an unknown engine, a worker count below 1, a scheduler without Dask, or Dask
    without the ``dask`` extra."""
    if engine not in ENGINES:
        raise InputError("--engine", engine, f"unknown engine; known: {', '.join(ENGINES)}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise InputError("--workers", workers, "give a whole number of workers, at least 1")
    if scheduler is not None and engine != "dask":
        raise InputError("--scheduler", scheduler, "a scheduler address needs --engine dask")
    if engine == "dask":
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise InputError("--engine", engine, "the Dask engine needs distributed: pip install 'optfleet[dask]'") from None


def run_scenarios(base: LoadedInstance, study: Sequence[tuple[int, Scenario]], methods: Sequence[str], *, engine: str = "local",
                  workers: int | None = None, scheduler: str | None = None) -> Completed:
    """Solve every ``(index, scenario)`` of ``study`` on ``engine`` (module docstring); ``workers`` defaults to
    min(cores, scenarios).  ``local`` with one worker runs in this process."""
    count = max(1, min(available_cores(), len(study)) if workers is None else workers)
    if engine == "serial" or (engine == "local" and count == 1):
        return ((index, solve_scenario(base, scenario, methods)) for index, scenario in study)
    if engine == "local":
        return _pool(base, study, methods, count)
    return _dask(base, study, methods, count, scheduler)


def batches(study: Sequence[tuple[int, Scenario]], workers: int) -> list[list[tuple[int, Scenario]]]:
    """``study`` cut, in order, into about ``workers x TASKS_PER_WORKER`` batches of equal size."""
    size = max(1, math.ceil(len(study) / (workers * TASKS_PER_WORKER)))
    return [list(study[start:start + size]) for start in range(0, len(study), size)]


_WORKER_BASE: LoadedInstance | None = None  # a pool worker's base instance, set once by its initializer
# A pool worker solves one scenario at a time: the numerical libraries' own thread pools would only compete with the
# other workers (OpenBLAS threads spinning while another process holds the core made a study 3x slower on 2 cores).
# Set in the worker before it imports numpy (the fork server does not import it); a value the user set wins.  Dask's
# nanny sets the same variables for its workers.
SINGLE_THREADED = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _load_base(base: LoadedInstance) -> None:
    global _WORKER_BASE
    for name in SINGLE_THREADED:
        os.environ.setdefault(name, "1")
    _WORKER_BASE = base


def _solve_on_worker(batch: Sequence[tuple[int, Scenario]], methods: Sequence[str]) -> list[tuple[int, list[dict[str, Any]]]]:
    assert _WORKER_BASE is not None, "the pool's initializer sets the base instance"
    return solve_batch(_WORKER_BASE, batch, methods)


def _pool(base: LoadedInstance, study: Sequence[tuple[int, Scenario]], methods: Sequence[str], workers: int) -> Completed:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload([__name__])  # the server imports optfleet once; every worker starts with it
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_load_base, initargs=(base,))
    try:
        futures = [pool.submit(_solve_on_worker, batch, list(methods)) for batch in batches(study, workers)]
        for future in as_completed(futures):
            yield from future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # an interrupted study cancels what has not started


def _dask(base: LoadedInstance, study: Sequence[tuple[int, Scenario]], methods: Sequence[str], workers: int,
          scheduler: str | None) -> Completed:
    from distributed import Client, LocalCluster, as_completed

    cluster = None if scheduler else LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                  dashboard_address=None, silence_logs=logging.ERROR)
    try:
        try:
            client = Client(scheduler or cluster)
        except OSError as exc:
            raise InputError("--scheduler", scheduler, f"cannot reach the Dask scheduler ({exc})") from None
        with client:
            shared = client.scatter(base, broadcast=True)
            size = workers if scheduler is None else max(1, len(client.scheduler_info()["workers"]))  # a running cluster's own
            futures = [client.submit(solve_batch, shared, batch, list(methods), pure=False) for batch in batches(study, size)]
            for future in as_completed(futures):
                yield from future.result()
    finally:
        if cluster is not None:
            cluster.close()
