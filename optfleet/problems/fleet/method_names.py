"""The names of the fleet heuristics (the literature's baselines), known without importing them (start-up time)."""

HEURISTICS = ("homogeneous", "pool-routing", "retrofit", "sweep")
