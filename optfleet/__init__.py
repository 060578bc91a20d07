"""optfleet: exact optimization models and literature heuristics for LLM fleets and caches.

The Python API (optfleet/api.py), the same as the command line::

    import optfleet
    optfleet.solve("instances/fleet/azure_2023.yaml", method="milp")   # SolveOutcome: .text(), .to_dict()
    optfleet.gap("instances/caching/tiny.yaml")                       # pandas DataFrame, core columns first
    optfleet.validate("instances/profiled/melange_example.yaml").text
    optfleet.load("instances/fleet/toy.yaml").problem                 # the prepared problem
    optfleet.sweep("instances/fleet/toy.yaml", {"workload.rate_rps": "50:200:50"}, methods="sweep")  # a study's DataFrame
    optfleet.explain("instances/fleet/toy_hetero.yaml").tables()["binding"]  # sensitivity of the exact plan

The functions are imported on first use, so ``import optfleet`` stays light.
"""

from typing import Any

__version__ = "0.1.0"

_API = ("load", "solve", "gap", "run_gap", "validate", "simulate")
__all__ = ["__version__", *_API, "sweep", "explain"]


def __getattr__(name: str) -> Any:
    if name in _API:
        from optfleet import api

        return getattr(api, name)
    if name == "explain":
        from optfleet.sensitivity.api import explain

        return explain
    if name == "sweep":
        from optfleet.studies import sweep

        return sweep
    raise AttributeError(f"module 'optfleet' has no attribute {name!r}")
