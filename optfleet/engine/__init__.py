"""The engine model: how long one iteration of a serving engine takes (step.py), from first principles
(roofline.py), NVIDIA's measured database (measured.py, the ``measured`` extra) or a fit to the user's own
measurements (benchmark_files.py, fit.py), and its affine reduction over a pool's operating region (reduce.py)."""

from optfleet.engine.reduce import affine_reduction
from optfleet.engine.roofline import RooflineEngine, roofline_engine
from optfleet.engine.step import AffineStep, EngineModel, prefill_pairs

__all__ = ["AffineStep", "EngineModel", "RooflineEngine", "affine_reduction", "prefill_pairs", "roofline_engine"]
