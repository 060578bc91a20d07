"""A fleet plan: pools with GPU counts and the routing rule; the same vocabulary as instances.

Routing (threshold, as the papers' routers): a request of total length L goes
to the pool with the smallest window ``C_j >= L``.  Compress-and-Route with
multiplier ``gamma``: a request that would go to pool ``j+1`` but has
``C_j < L <= gamma C_j`` is, with probability ``p_c`` (its category is
compressible) and if ``L_out < C_j``, cut to ``T_c = C_j - L_out`` input tokens
and sent to pool ``j`` (so ``T_c + L_out = C_j``); otherwise it stays in
pool ``j+1``.  ``gamma = 1`` is plain pool routing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from optfleet.errors import InputError


@dataclass(frozen=True)
class PoolPlan:
    """One pool: a name, its context window and its GPU (instance) count."""

    name: str
    window_tokens: int
    gpus: int


@dataclass(frozen=True)
class Plan:
    """Pools sorted by window, the C&R multiplier, and who produced the plan (for reports only)."""

    pools: tuple[PoolPlan, ...]
    gamma: float = 1.0
    method: str = "user"
    notes: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        windows = [p.window_tokens for p in self.pools]
        if not self.pools:
            raise InputError("plan.pools", [], "a plan needs at least one pool")
        if windows != sorted(set(windows)):
            raise InputError("plan.pools", windows, "pool windows must be distinct and increasing")
        if self.gamma < 1.0:
            raise InputError("plan.gamma", self.gamma, "gamma must be >= 1")
        for i, pool in enumerate(self.pools):
            if pool.gpus < 0:
                raise InputError(f"plan.pools[{i}].gpus", pool.gpus, "GPU counts must be >= 0")

    @property
    def boundary_tokens(self) -> int | None:
        """The short window B of a two-pool plan (None for one pool)."""
        return self.pools[0].window_tokens if len(self.pools) > 1 else None

    def with_gpus(self, gpus: list[int] | tuple[int, ...]) -> "Plan":
        """The same routing with other GPU counts."""
        pools = tuple(PoolPlan(p.name, p.window_tokens, int(n)) for p, n in zip(self.pools, gpus, strict=True))
        return Plan(pools=pools, gamma=self.gamma, method=self.method, notes=self.notes)

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "gamma": self.gamma, "pools": [asdict(p) for p in self.pools]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Plan":
        """Read a plan written by :meth:`to_dict` (e.g. ``optfleet solve --json`` output)."""
        try:
            pools = tuple(PoolPlan(str(p["name"]), int(p["window_tokens"]), int(p["gpus"])) for p in data["pools"])
            return cls(pools=pools, gamma=float(data.get("gamma", 1.0)), method=str(data.get("method", "user")))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError("plan", data, f"not a plan ({exc})") from None

