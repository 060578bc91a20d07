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
import threading
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


CONNECT_TIMEOUT_S = 10.0
"""How long a study waits to reach a Dask scheduler (``--connect-timeout-s``): long enough for a scheduler across a
data centre, short enough that a wrong address fails fast (distributed's own default is 30 s, and a TCP service that
is not Dask kept the connection open for ever)."""
MAX_CONNECT_TIMEOUT_S = 3600.0


def check_engine(engine: str, workers: int | None, scheduler: str | None, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Refuse, before any work, an unknown engine, a worker count below 1, a scheduler without Dask, Dask without
    the ``dask`` extra, a scheduler address Dask cannot parse, or a connect timeout outside (0, 1 h]."""
    if engine not in ENGINES:
        raise InputError("--engine", engine, f"unknown engine; known: {', '.join(ENGINES)}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise InputError("--workers", workers, "give a whole number of workers, at least 1")
    if scheduler is not None and engine != "dask":
        raise InputError("--scheduler", scheduler, "a scheduler address needs --engine dask")
    if (isinstance(connect_timeout_s, bool) or not isinstance(connect_timeout_s, (int, float)) or not math.isfinite(connect_timeout_s)
            or not 0 < connect_timeout_s <= MAX_CONNECT_TIMEOUT_S):
        raise InputError("--connect-timeout-s", connect_timeout_s, f"give seconds above 0, at most {MAX_CONNECT_TIMEOUT_S:g}")
    if engine == "dask":
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise InputError("--engine", engine, "the Dask engine needs distributed: pip install 'optfleet[dask]'") from None
        if scheduler is not None:
            check_scheduler_address(scheduler)


def check_scheduler_address(address: str) -> None:
    """A Dask scheduler address: ``[protocol://]host:port`` with a protocol distributed knows (``tcp``, ``tls``,
    ``inproc``, ...), a host and, for ``tcp``/``tls``, a port from 1 to 65535 (a scheduler listens on 8786 unless told
    otherwise)."""
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import backends

    if not isinstance(address, str) or not address.strip():
        raise InputError("--scheduler", address, "give a scheduler address, e.g. tcp://host:8786")
    try:
        protocol, location = parse_address(address)
        if protocol not in backends:
            raise ValueError(f"unknown protocol {protocol!r}; known: {', '.join(sorted(backends))}")
        if protocol in ("tcp", "tls"):
            host, port = parse_host_port(location)
            if not host or not 0 < int(port) < 65536:
                raise ValueError("give a host and a port from 1 to 65535")
    except (ValueError, TypeError) as exc:
        raise InputError("--scheduler", address, f"not a Dask scheduler address ({exc}); e.g. tcp://host:8786") from None


def run_scenarios(base: LoadedInstance, study: Sequence[tuple[int, Scenario]], methods: Sequence[str], *, engine: str = "local",
                  workers: int | None = None, scheduler: str | None = None, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> Completed:
    """Solve every ``(index, scenario)`` of ``study`` on ``engine`` (module docstring); ``workers`` defaults to
    min(cores, scenarios).  ``local`` with one worker runs in this process; ``dask`` waits at most
    ``connect_timeout_s`` to reach its scheduler."""
    count = max(1, min(available_cores(), len(study)) if workers is None else workers)
    if engine == "serial" or (engine == "local" and count == 1):
        return ((index, solve_scenario(base, scenario, methods)) for index, scenario in study)
    if engine == "local":
        return _pool(base, study, methods, count)
    return _dask(base, study, methods, count, scheduler, connect_timeout_s)


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


def _connect(scheduler: str, timeout_s: float) -> Any:
    """A Dask client of the scheduler at ``scheduler``, or an InputError within about ``timeout_s``: distributed's own
    timeout covers the connection, not the handshake, so a TCP service that is not Dask kept the client waiting for
    ever; the client is made in a daemon thread that is abandoned when the time is up."""
    from distributed import Client

    made: dict[str, Any] = {}

    def connect() -> None:
        try:
            made["client"] = Client(scheduler, timeout=f"{timeout_s}s")
        except Exception as exc:  # reported below, in the caller's thread
            made["error"] = exc

    thread = threading.Thread(target=connect, name="optfleet-dask-connect", daemon=True)
    thread.start()
    thread.join(timeout_s + 1.0)
    if thread.is_alive():
        raise InputError("--scheduler", scheduler, f"no Dask scheduler answered within {timeout_s:g} s (--connect-timeout-s): the "
                                                   "address accepts connections but does not answer as a Dask scheduler")
    if "error" in made:
        raise InputError("--scheduler", scheduler, f"cannot reach a Dask scheduler within {timeout_s:g} s (--connect-timeout-s): "
                                                   f"{made['error']}")
    return made["client"]


def _dask(base: LoadedInstance, study: Sequence[tuple[int, Scenario]], methods: Sequence[str], workers: int,
          scheduler: str | None, connect_timeout_s: float) -> Completed:
    from distributed import Client, LocalCluster, as_completed

    cluster = None if scheduler else LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                  dashboard_address=None, silence_logs=logging.ERROR)
    try:
        client = Client(cluster) if scheduler is None else _connect(scheduler, connect_timeout_s)
        with client:
            shared = client.scatter(base, broadcast=True)
            size = workers if scheduler is None else max(1, len(client.scheduler_info()["workers"]))  # a running cluster's own
            futures = [client.submit(solve_batch, shared, batch, list(methods), pure=False) for batch in batches(study, size)]
            for future in as_completed(futures):
                yield from future.result()
    finally:
        if cluster is not None:
            cluster.close()
