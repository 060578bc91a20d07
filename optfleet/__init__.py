"""optfleet: exact optimization models and literature heuristics for LLM fleets and caches."""

__version__ = "0.1.0"
