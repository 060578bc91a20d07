"""The placement simulator compiled with numba (the optional ``fast`` extra): the same servers, caches, oracle
forecasts and predicted-latency choice as the Python modules, the same numbers bit for bit, about ten times faster.

What is compiled, each a port of the Python reference it names (tests/test_placement_compiled.py checks placements,
first tokens, completions and the oracle's MAPE against the reference on every shipped scenario and on random
instances):

* one server's iteration loop (server.Server: ``_plan``, ``_finish_iteration``, ``advance``, ``enqueue``) over
  requests kept as rows of integer and float arrays;
* its block cache (cache.BlockCache: origins, holders, cached segments and the LRU), with the origins in a hash
  map keyed by server and origin, and holders and segments in linked lists over preallocated pools;
* the oracle's forward run (forecast.forecast, with its decode-only closed form ``_decode_tail``) on every server
  for every request;
* the predicted-latency scorer's choice (policies.affinity_candidates, policies.pick_by_latency), with the
  exploration draws taken from the policy's own generator, one per request as the Python scorer draws them.

Floating-point operations are done in the reference's order (``Engine.iteration_ms`` left to right, end times
accumulated ``end + repeats * step``), and numba compiles without fast-math, so no operation is fused or
reordered.  The Python modules stay the reference and the fallback without numba.

Modules: ``kernels`` (every compiled function, in one file so that numba's cache never keeps a stale caller) and
``runs`` (their Python side: :func:`~runs.route_oracle` places requests online, as policies.route;
:func:`~runs.replay` replays a fixed placement, as evaluate.replay).
"""

