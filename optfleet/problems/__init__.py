"""The problem kinds: one package each (registered in optfleet/registry.py)."""
