"""Which placement simulator runs: the compiled one (compiled/: numba, the optional ``fast`` extra) or the Python
reference (server.py, cache.py, forecast.py, policies.py).  Both give the same numbers bit for bit
(tests/test_placement_compiled.py); the compiled one is about ten times faster once compiled.

``engine``: ``"auto"`` the compiled one when numba is installed, the run's tables fit (compiled.runs.fits) and the
workload has at least :data:`AUTO_MIN_REQUESTS` requests, else Python; ``"python"`` always the reference;
``"compiled"`` the compiled one or an error saying why it cannot run.  Not given (None): the environment variable
``OPTFLEET_PLACEMENT_ENGINE`` if set, else ``"auto"``, so the command line can choose too.

Why a size floor for ``"auto"``: loading the compiled code from numba's cache takes about a second per process,
and compiling it the first time (a fresh install) about 20 s, while the Python engine replays the shipped
instances (a few hundred requests each) in well under a second.  At 20,000 requests over 100 servers the Python
oracle takes about 5 s and a Python replay about 0.5 s, and both grow linearly (bench_placement.py).
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING

from optfleet.errors import InputError

if TYPE_CHECKING:
    from optfleet.problems.placement.problem import PlacementProblem

ENGINES = ("auto", "python", "compiled")
ENVIRONMENT = "OPTFLEET_PLACEMENT_ENGINE"
AUTO_MIN_REQUESTS = 20_000


def compiled_engine(problem: "PlacementProblem", engine: str | None = None) -> ModuleType | None:
    """The compiled runs (compiled/runs.py: ``route_oracle``, ``replay``) when ``engine`` asks for them and they can
    run on ``problem`` (module docstring), else None."""
    field = "engine"
    if engine is None:
        engine = os.environ.get(ENVIRONMENT) or "auto"
        field = ENVIRONMENT if ENVIRONMENT in os.environ else field
    if engine not in ENGINES:
        raise InputError(field, engine, f"unknown simulator engine; known: {', '.join(ENGINES)}")
    if engine == "python" or (engine == "auto" and len(problem.requests) < AUTO_MIN_REQUESTS):
        return None
    try:
        from optfleet.problems.placement.compiled import runs
    except ImportError as exc:
        if engine == "compiled":
            raise InputError(field, engine, f"the compiled simulator needs numba: pip install 'optfleet[fast]' ({exc})") from exc
        return None
    if not runs.fits(problem):
        if engine == "compiled":
            raise InputError(field, engine, f"the servers' running slots exceed the compiled tables' {runs.MAX_CELLS:,} cells")
        return None
    return runs
