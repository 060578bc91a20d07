"""The hindsight placement MILP: which server serves each request, knowing every arrival in advance.

Service model (a simplification of the simulator, chosen so that its optimum is a lower bound on the simulator's
best placement, see the kind's exact.py for the proof sketch): each server prefills the requests placed on it
first come, first served, one token after another at ``alpha_k`` ms per uncached token; decoding, batching
limits and KV room are left out, and one iteration's base time ``beta_k`` is added to every first token.
Reuse is at its most generous: a request reuses its group's system prompt ``G_r`` tokens if an earlier request
of its group is on the same server, and its whole reusable prompt ``H_r`` if an earlier turn of its
conversation is (no eviction).  A request without a group reuses only through its conversation (``G_r = 0``,
and its "group" in the rows below is its conversation).

Variables: ``x[r,k]`` (request r on server k), ``y[r,k]`` (r reuses its group's prompt on k), ``z[r,k]`` (r
reuses its conversation on k), ``s[r]`` and ``c[r]`` (prefill start and end, ms), ``e[r]`` (TTFT above the SLO).

    sum_k x[r,k] = 1                                                                     (assign)
    y[r,k] <= x[r,k],  y[r,k] <= prior_g[r,k] + sum_{r' < r, g(r') = g(r)} x[r',k]          (group_reuse)
    z[r,k] <= y[r,k],  z[r,k] <= prior_s[r,k] + sum_{r' < r, s(r') = s(r)} x[r',k]          (session_reuse)
    s[r] >= a[r];  s[r] >= ready[k] - M (1 - x[r,k])                                      (release)
    s[r] >= c[r'] - M[r',r] (2 - x[r,k] - x[r',k])   for r' < r on a shared server          (fcfs)
    c[r] = s[r] + sum_k alpha_k (P[r] x[r,k] - G[r] y[r,k] - (H[r] - G[r]) z[r,k])          (prefill)
    TTFT[r] = c[r] - a[r] + sum_k beta_k x[r,k]

Objective: ``(1/n) sum_r TTFT[r]`` (``total_ttft``, the mean) or ``(1/n) sum_r e[r]`` with
``e[r] >= TTFT[r] - SLO``, ``e >= 0`` (``ttft_excess``).  ``M[r',r] = C̄[r'] - a[r]`` with ``C̄[r']`` the
completion of ``r'`` when every request up to it is on the slowest server without reuse (an upper bound at any
optimum); pairs with ``M <= 0`` are dropped (``r'`` is done before ``r`` arrives).  Identical servers are
ordered by first use (``x[r,k] <= sum_{r' < r} x[r',k-1]`` within a class of identical servers), which removes
their permutations without losing a placement.

``ready[k]``, ``prior_g`` and ``prior_s`` carry a look-ahead window's starting state (0 in hindsight), and a
window may cap the requests per server, ``sum_r x[r,k] <= max_per_server`` (balance; never in hindsight, where
it would cut placements off and the optimum would no longer bound the simulator's).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo

from optfleet.models.clock import BuildClock, building, checkpoint, ruled
from optfleet.models.linear import total


@dataclass(frozen=True)
class PlacementData:
    """The MILP's numbers: arrivals ``a`` (ms), prompt tokens ``P``, reusable group tokens ``G`` and reusable
    prompt tokens ``H >= G`` per request, group and session ids, per-server ``alpha`` (ms per uncached token) and
    ``beta`` (ms per first token), identical-server classes, the window's starting state and the SLO (ms)."""

    arrival_ms: np.ndarray
    prompt_tokens: np.ndarray
    group_tokens: np.ndarray
    reusable_tokens: np.ndarray
    group: np.ndarray
    session: np.ndarray
    alpha_ms_per_token: np.ndarray
    beta_ms: np.ndarray
    server_class: np.ndarray
    ready_ms: np.ndarray
    prior_group: np.ndarray  # [r, k] in {0, 1}
    prior_session: np.ndarray
    objective: str = "total_ttft"
    slo_ttft_ms: float | None = None
    max_per_server: int | None = None  # a look-ahead window's cap on requests per server (None in hindsight)

    @property
    def n(self) -> int:
        return int(self.arrival_ms.shape[0])

    @property
    def k(self) -> int:
        return int(self.alpha_ms_per_token.shape[0])


def completion_upper_bounds(d: PlacementData) -> np.ndarray:
    """``C̄[r]``: every request up to ``r`` on the slowest server, no reuse, after the latest ready time."""
    slowest = float(d.alpha_ms_per_token.max())
    bound, end = np.empty(d.n), float(d.ready_ms.max(initial=0.0))
    for r in range(d.n):
        end = max(end, float(d.arrival_ms[r])) + slowest * float(d.prompt_tokens[r])
        bound[r] = end
    return bound


def variable_assignment(m: pyo.ConcreteModel) -> None:
    m.x = pyo.Var(m.R, m.K, domain=pyo.Binary)
    m.y = pyo.Var(m.R, m.K, bounds=(0, 1))
    m.z = pyo.Var(m.R, m.K, bounds=(0, 1))


def variable_times(m: pyo.ConcreteModel, d: PlacementData) -> None:
    m.s = pyo.Var(m.R, bounds=lambda _, r: (float(d.arrival_ms[r]), None))
    m.c = pyo.Var(m.R, domain=pyo.NonNegativeReals)


class Earlier:
    """The requests before each one that share its key (its session, or its group), in order, without holding the
    O(n^2) lists: ``members[key][:position[r]]``."""

    def __init__(self, keys: list) -> None:
        self.members: dict = {}
        self.keys = keys
        self.position = []
        for r, key in enumerate(keys):
            group = self.members.setdefault(key, [])
            self.position.append(len(group))
            group.append(r)

    def __getitem__(self, r: int) -> list[int]:
        return self.members[self.keys[r]][: self.position[r]]

    @property
    def pairs(self) -> int:
        """``sum_r len(self[r])``: the terms the rows that sum over them hold."""
        return sum(self.position)


def earlier_session(d: PlacementData) -> Earlier:
    return Earlier(d.session.tolist())


def earlier_group(d: PlacementData) -> Earlier:
    """A request's group, or, without one, its conversation (module docstring)."""
    return Earlier([("group", g) if g >= 0 else ("session", s) for g, s in zip(d.group.tolist(), d.session.tolist(), strict=True)])


def fcfs_first_earlier(d: PlacementData) -> np.ndarray:
    """For each request ``r`` the first ``q`` with ``C̄[q] > a[r]``: the FCFS pairs of ``r`` are ``q`` in
    ``[first, r)`` (``C̄`` never decreases, so the pairs with ``M[q,r] > 0`` are a run ending at ``r - 1``)."""
    upper = completion_upper_bounds(d)
    return np.minimum(np.searchsorted(upper, d.arrival_ms, side="right"), np.arange(d.n))


def fcfs_pairs(d: PlacementData) -> list[tuple[int, int]]:
    """The ``(r', r)`` pairs of the fcfs rows, ``r`` ascending, then ``r'``."""
    first = fcfs_first_earlier(d).tolist()
    return [(q, r) for r in range(d.n) for q in range(first[r], r)]


def symmetric_servers(d: PlacementData) -> list[int]:
    """The servers ``k >= 1`` of the class of server ``k - 1`` (none with a starting state: constraint_symmetry)."""
    if d.ready_ms.any() or d.prior_group.any() or d.prior_session.any():
        return []
    return [k for k in range(1, d.k) if d.server_class[k] == d.server_class[k - 1]]


def model_size(d: PlacementData) -> dict[str, int]:
    """The rows, columns and nonzeros :func:`build` makes (nonzeros an upper bound: terms with a zero coefficient are
    counted), from the data alone: what a build will cost is known before it starts."""
    n, k = d.n, d.k
    first = fcfs_first_earlier(d)
    pairs = int((np.arange(n) - first).sum())
    reuse_terms = earlier_group(d).pairs + earlier_session(d).pairs
    release = int(sum(int((d.arrival_ms < ready).sum()) for ready in d.ready_ms if ready > 0))
    symmetric = len(symmetric_servers(d))
    excess = int(d.objective == "ttft_excess")
    rows = n + 4 * n * k + n + pairs * k + release + symmetric * n + (k if d.max_per_server is not None else 0) + excess * n
    nonzeros = (n * k + 6 * n * k + reuse_terms * k + n * (2 + 3 * k) + 4 * pairs * k + 2 * release + symmetric * (n + n * (n - 1) // 2)
                + (n * k if d.max_per_server is not None else 0) + excess * n * (2 + k))
    return {"rows": rows, "columns": 3 * n * k + (2 + excess) * n, "nonzeros": nonzeros}


def constraint_assign(m: pyo.ConcreteModel, clock: BuildClock | None = None) -> None:
    m.assign = pyo.Constraint(m.R, rule=ruled(clock, "assign", lambda m, r: sum(m.x[r, k] for k in m.K) == 1))


def constraint_reuse(m: pyo.ConcreteModel, d: PlacementData, clock: BuildClock | None = None) -> None:
    same_session, same_group = earlier_session(d), earlier_group(d)
    m.group_held = pyo.Constraint(m.R, m.K, rule=ruled(clock, "group_held", lambda m, r, k: m.y[r, k] <= m.x[r, k]))
    m.group_reuse = pyo.Constraint(m.R, m.K, rule=ruled(clock, "group_reuse", lambda m, r, k: m.y[r, k] <= float(d.prior_group[r, k])
                                                        + total([m.x[q, k] for q in same_group[r]])))
    m.session_held = pyo.Constraint(m.R, m.K, rule=ruled(clock, "session_held", lambda m, r, k: m.z[r, k] <= m.y[r, k]))
    m.session_reuse = pyo.Constraint(m.R, m.K, rule=ruled(clock, "session_reuse", lambda m, r, k: m.z[r, k] <= float(d.prior_session[r, k])
                                                          + total([m.x[q, k] for q in same_session[r]])))


def constraint_prefill(m: pyo.ConcreteModel, d: PlacementData, clock: BuildClock | None = None) -> None:
    a, P, G, H = d.alpha_ms_per_token, d.prompt_tokens, d.group_tokens, d.reusable_tokens

    def prefill(m, r):
        work = sum(float(a[k]) * (float(P[r]) * m.x[r, k] - float(G[r]) * m.y[r, k] - float(H[r] - G[r]) * m.z[r, k]) for k in m.K)
        return m.c[r] == m.s[r] + work

    m.prefill = pyo.Constraint(m.R, rule=ruled(clock, "prefill", prefill))


def constraint_fcfs(m: pyo.ConcreteModel, d: PlacementData, clock: BuildClock | None = None) -> None:
    upper = completion_upper_bounds(d)
    pairs = fcfs_pairs(d)
    m.PAIRS = pyo.Set(initialize=pairs, dimen=2)
    big_m = {(q, r): float(upper[q] - d.arrival_ms[r]) for q, r in pairs}
    m.fcfs = pyo.Constraint(m.PAIRS, m.K, rule=ruled(clock, "fcfs", lambda m, q, r, k: m.s[r] >= m.c[q] - big_m[q, r] * (2 - m.x[r, k] - m.x[q, k])))
    ready = {k: float(d.ready_ms[k]) for k in range(d.k) if d.ready_ms[k] > 0}
    m.release = pyo.Constraint([(r, k) for r in range(d.n) for k in ready if ready[k] > d.arrival_ms[r]],
                               rule=ruled(clock, "release", lambda m, r, k: m.s[r] >= ready[k] - (ready[k] - float(d.arrival_ms[r])) * (1 - m.x[r, k])))


def constraint_symmetry(m: pyo.ConcreteModel, d: PlacementData, clock: BuildClock | None = None) -> None:
    """Identical servers (same class) are used in index order: server k's first request comes after server
    k-1's.  Only when no server carries a starting state (hindsight), where relabelling them changes nothing."""
    servers = symmetric_servers(d)
    if not servers:
        return
    rows = [(r, k) for r in range(d.n) for k in servers]
    m.first_use = pyo.Constraint(rows, rule=ruled(clock, "first_use", lambda m, r, k: m.x[r, k] <= total([m.x[q, k - 1] for q in range(r)])))


def constraint_balance(m: pyo.ConcreteModel, d: PlacementData) -> None:
    """``sum_r x[r,k] <= max_per_server`` (look-ahead windows only: the model sees no decode load, see exact.py)."""
    if d.max_per_server is not None:
        m.balance = pyo.Constraint(m.K, rule=lambda m, k: sum(m.x[r, k] for r in m.R) <= d.max_per_server)


def ttft_expression(m: pyo.ConcreteModel, d: PlacementData, r: int):
    return m.c[r] - float(d.arrival_ms[r]) + sum(float(d.beta_ms[k]) * m.x[r, k] for k in m.K)


def objective_ttft(m: pyo.ConcreteModel, d: PlacementData) -> None:
    if d.objective == "ttft_excess":
        m.e = pyo.Var(m.R, domain=pyo.NonNegativeReals)
        m.excess = pyo.Constraint(m.R, rule=lambda m, r: m.e[r] >= ttft_expression(m, d, r) - float(d.slo_ttft_ms))
        m.obj = pyo.Objective(expr=sum(m.e[r] for r in m.R) / d.n, sense=pyo.minimize)
    else:
        m.obj = pyo.Objective(expr=sum(ttft_expression(m, d, r) for r in m.R) / d.n, sense=pyo.minimize)


def build(d: PlacementData, clock: BuildClock | None = None) -> pyo.ConcreteModel:
    """The MILP of the module docstring; with a ``clock``, a build that outlasts its deadline stops
    (:class:`~optfleet.errors.NoPlanInTimeError`, models/clock.py)."""
    m = pyo.ConcreteModel(name="placement")
    m.R = pyo.RangeSet(0, d.n - 1)
    m.K = pyo.RangeSet(0, d.k - 1)
    variable_assignment(m)
    variable_times(m, d)
    with building(clock):
        for family, add in (("assign", lambda: constraint_assign(m, clock)), ("reuse", lambda: constraint_reuse(m, d, clock)),
                            ("prefill", lambda: constraint_prefill(m, d, clock)), ("fcfs", lambda: constraint_fcfs(m, d, clock)),
                            ("symmetry", lambda: constraint_symmetry(m, d, clock))):
            checkpoint(clock, family)
            add()
    constraint_balance(m, d)
    objective_ttft(m, d)
    return m


ARRIVAL_FAMILIES = ("PAIRS", "fcfs", "release", "first_use", "balance", "e", "excess", "obj")
"""What :func:`rearrive` declares again: the families that read the arrival times, and those :func:`build` declares
after them."""


def rearrive(m: pyo.ConcreteModel, d: PlacementData, clock: BuildClock | None = None) -> None:
    """``m``, built for the same requests and servers at other arrival times, made the MILP of ``d``: the bounds
    ``s[r] >= a[r]``, the fcfs and release rows and the objective declared again, and ``first_use`` and ``balance``,
    which do not read the arrivals, after them as :func:`build` declares them, so the model's rows (and HiGHS's run)
    are :func:`build`'s.  The assignment, reuse and prefill rows stay."""
    for name in ARRIVAL_FAMILIES:
        if m.component(name) is not None:
            m.del_component(name)
    for r in m.R:
        m.s[r].setlb(float(d.arrival_ms[r]))
    with building(clock):
        constraint_fcfs(m, d, clock)
        constraint_symmetry(m, d, clock)
    constraint_balance(m, d)
    objective_ttft(m, d)


def extract(m: pyo.ConcreteModel, d: PlacementData) -> np.ndarray:
    """The placement: each request's server (its largest ``x``)."""
    return np.array([max(range(d.k), key=lambda k: pyo.value(m.x[r, k])) for r in range(d.n)], dtype=np.int64)


def model_ttft_ms(d: PlacementData, placement: np.ndarray) -> np.ndarray:
    """Every request's TTFT under the MILP's service model for a given placement (its Lindley recursion with the
    reuse the model allows): what the MILP's objective is for that placement, and what a look-ahead window
    carries forward."""
    ttft, ready = np.empty(d.n), d.ready_ms.astype(float).copy()
    groups = [set() for _ in range(d.k)]
    sessions = [set() for _ in range(d.k)]
    for r in range(d.n):
        k = int(placement[r])
        reuse_session = bool(d.prior_session[r, k]) or int(d.session[r]) in sessions[k]
        reuse_group = bool(d.prior_group[r, k]) or (d.group[r] >= 0 and int(d.group[r]) in groups[k]) or reuse_session
        uncached = d.prompt_tokens[r] - (d.group_tokens[r] if reuse_group else 0) - ((d.reusable_tokens[r] - d.group_tokens[r]) if reuse_session else 0)
        start = max(float(d.arrival_ms[r]), ready[k])
        ready[k] = start + float(d.alpha_ms_per_token[k]) * float(uncached)
        ttft[r] = ready[k] - d.arrival_ms[r] + d.beta_ms[k]
        groups[k].add(int(d.group[r]))
        sessions[k].add(int(d.session[r]))
    return ttft
