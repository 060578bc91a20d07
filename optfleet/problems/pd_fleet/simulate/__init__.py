"""Discrete-event simulation of one prefill/decode-disaggregated pool, by the serving policy of roles.py.

What is modelled: Poisson arrivals; one FCFS prefill queue over the ``x`` prefill instances, each serving one prompt
at a time in chunks of the token budget, timed by the engine (prefill.py); one FCFS KV link per prefill instance,
working while the instance prefills the next prompt (prefill.py); a uniformly random decode instance per request;
continuous batching on each decode instance, up to ``max_batch`` sequences, an FCFS admission queue, admission at
iteration boundaries, each iteration timed by the engine at its batch and total context (decode.py); per-request
times and per-role busy shares after a warm-up (trace.py, metrics.py); replications with 95 % intervals (pool.py).

What is not: packing several prompts into one prefill iteration; decode routing by load (the choice is random);
preemption, KV-cache eviction or recomputation (a decode instance's memory is taken to hold ``max_batch`` sequences
at their full context); prefix caching; link contention between prefill instances (each has its own link); failures.
The decode engine must be an affine step (engine/step.py ``AffineStep``; reduce any other engine with
``optfleet.engine.affine_reduction``): its runs are timed in closed form.  Prefill chunks use any engine exactly.
"""

from optfleet.problems.pd_fleet.simulate.metrics import measure
from optfleet.problems.pd_fleet.simulate.pool import PoolSimulation, simulate_pool
from optfleet.problems.pd_fleet.simulate.trace import PoolTrace, simulate_requests, ttft_floor_ms

__all__ = ["PoolSimulation", "PoolTrace", "measure", "simulate_pool", "simulate_requests", "ttft_floor_ms"]
