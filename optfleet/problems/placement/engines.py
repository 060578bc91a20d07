"""Which placement simulator runs: the compiled one (compiled/: numba, the optional ``fast`` extra) or the Python
reference (server.py, cache.py, forecast.py, policies.py).  Both give the same numbers bit for bit
(tests/test_placement_compiled.py); the compiled one is about ten times faster.

``engine``: ``"auto"`` (default) the compiled one when numba is installed and the run's tables fit
(compiled.runs.fits), else Python; ``"python"`` always the reference; ``"compiled"`` the compiled one or an error
saying why it cannot run.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from optfleet.errors import InputError

if TYPE_CHECKING:
    from optfleet.problems.placement.problem import PlacementProblem

ENGINES = ("auto", "python", "compiled")


def compiled_engine(problem: "PlacementProblem", engine: str = "auto") -> ModuleType | None:
    """The compiled runs (compiled/runs.py: ``route_oracle``, ``replay``) when ``engine`` asks for them and they can
    run on ``problem`` (module docstring), else None."""
    if engine not in ENGINES:
        raise InputError("engine", engine, f"unknown simulator engine; known: {', '.join(ENGINES)}")
    if engine == "python":
        return None
    try:
        from optfleet.problems.placement.compiled import runs
    except ImportError as exc:
        if engine == "compiled":
            raise InputError("engine", engine, f"the compiled simulator needs numba: pip install 'optfleet[fast]' ({exc})") from exc
        return None
    if not runs.fits(problem):
        if engine == "compiled":
            raise InputError("engine", engine, f"the servers' running slots exceed the compiled tables' {runs.MAX_CELLS:,} cells")
        return None
    return runs
