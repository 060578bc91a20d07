"""Sensitivity and what-if analysis of a kind's exact plan (``optfleet explain``, ``optfleet.explain``).

explainer.py: what a kind declares (the registry's ``explain`` hook); run.py: curves, break-even, alternatives by
re-solving; api.py: the Python API; report.py: text, JSON and the curves' plot.
"""
