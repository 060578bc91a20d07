"""Queueing math: Erlang B/C in log space, Kimura's P99 wait, pool sizing, Erlang-C load tables."""

from optfleet.queueing.erlang import erlang_b, erlang_c, log_erlang_b
from optfleet.queueing.kimura import wait_quantile_s
from optfleet.queueing.load_limits import erlang_tables, wait_free_gpus
from optfleet.queueing.sizing import INFEASIBLE, MAX_GPUS, RELATIVE_TOLERANCE, cap_lower_bound_gpus, min_instances, pool_is_feasible

__all__ = [
    "INFEASIBLE",
    "MAX_GPUS",
    "RELATIVE_TOLERANCE",
    "cap_lower_bound_gpus",
    "erlang_b",
    "erlang_c",
    "erlang_tables",
    "log_erlang_b",
    "min_instances",
    "pool_is_feasible",
    "wait_free_gpus",
    "wait_quantile_s",
]
