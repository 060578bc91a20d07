"""Fixtures shared by test modules: an empty optfleet cache, and no network but loopback (as on a fresh clone); numba's
compiled code kept per numba version."""

from __future__ import annotations

import importlib.metadata
import ipaddress
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


# Modules whose tests run on one xdist worker (all other tests go one by one to whichever worker is nearly idle): each
# pays a cost once per process that its tests share.  pytest-xdist's own `--dist loadgroup` cannot do this on pytest
# >= 9.2, where its xdist_group suffix on the test ids no longer takes effect (pytest-xdist issue 1386).
ONE_WORKER_MODULES = {
    "tests/test_placement_compiled.py": "on a fresh clone numba compiles the simulator's kernels there, about 20 s",
    "tests/test_threshold_bounds.py": "its catalogs' case optima are solved once for the module (solved_catalog)",
}


@pytest.hookimpl(optionalhook=True)  # declared by pytest-xdist (the test extra installs it)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """Under the default ``--dist load``: xdist's scope scheduler with each module of :data:`ONE_WORKER_MODULES` one
    unit of work and every other test a unit of its own (larger units first); another ``--dist`` is left to xdist."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class OneWorkerModules(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in ONE_WORKER_MODULES else nodeid

    return OneWorkerModules(config, log)


def pytest_configure(config: pytest.Config) -> None:
    """Set up once per process, before any test module is imported: bytecode written, numba's cache folder, one
    BLAS thread per xdist worker."""
    _write_bytecode()
    _numba_cache(config)
    _one_blas_thread_per_worker(config)


def _write_bytecode() -> None:
    """Bytecode written (``__pycache__`` beside the sources, which git ignores) even where the environment says
    PYTHONDONTWRITEBYTECODE, for this process and the processes the tests start (xdist's workers, ``python -m
    optfleet``, the studies' pools): without it each of them compiled optfleet's modules again, and each worker
    rewrote and compiled every test module again, about 6 of its 11 s of collection on this machine."""
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def _numba_cache(config: pytest.Config) -> None:
    """numba's cache (the compiled placement simulator's kernels, ``cache=True``) in pytest's cache folder, one folder per
    numba version: CI runs the suite at the newest and at the lowest declared versions in turn, and numba keeps one
    index per function stamped with its version, so a shared cache was compiled again (about 20 s) by every run.
    Set before numba is imported (no test module is imported yet); a NUMBA_CACHE_DIR of the user's own is kept."""
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider: numba's default, __pycache__ beside the code
    try:
        version = importlib.metadata.version("numba")
    except importlib.metadata.PackageNotFoundError:
        return
    if cache is not None and "NUMBA_CACHE_DIR" not in os.environ:
        os.environ["NUMBA_CACHE_DIR"] = str(cache.mkdir(f"numba-{version}"))


def _one_blas_thread_per_worker(config: pytest.Config) -> None:
    """Under xdist (``-n``: one worker per core), OpenBLAS (numpy's and scipy's BLAS) in each worker and in the
    processes the tests start runs on one thread, unless the environment says otherwise.  By default each worker's
    OpenBLAS starts one thread per core, so two workers ran four busy threads on two cores: the evaluator's
    vectorised statistics of many small matrix products (tests/test_evaluator.py, the capacity plan's tables) took
    several times longer and their waiting threads spun on the CPU.  Set in the controller before the workers start
    (they inherit it) and in each worker before numpy is imported; ``-n 0`` keeps OpenBLAS's default."""
    under_xdist = bool(getattr(config.option, "numprocesses", None)) or "PYTEST_XDIST_WORKER" in os.environ
    if under_xdist:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder of optfleet's own (``OPTFLEET_CACHE_DIR``), not yet created."""
    root = tmp_path / "optfleet-cache"
    monkeypatch.setenv("OPTFLEET_CACHE_DIR", str(root))
    return root


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """No network but loopback: a connection or a name lookup elsewhere fails, and fails the test."""
    attempts: list[object] = []
    real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def connect(sock: socket.socket, address: object) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not ipaddress.ip_address(address[0]).is_loopback:  # type: ignore[index]
            attempts.append(address)
            raise OSError(f"offline test: no connection to {address}")
        return real_connect(sock, address)

    def getaddrinfo(host: object, *args: object, **kwargs: object) -> object:
        if host not in (None, "localhost", "127.0.0.1", "::1"):
            attempts.append(host)
            raise socket.gaierror(f"offline test: no lookup of {host}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    yield attempts
    assert not attempts, f"the test reached for the network: {attempts}"
