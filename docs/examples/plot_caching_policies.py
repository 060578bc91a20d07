"""
Cache eviction policies against the hindsight optimum
=====================================================

The tiny conversation trace (``instances/caching/tiny.yaml``) at two cache
capacities. Each online policy (LRU, T-LRU and its variants) and the
hindsight greedy (Tail-Optimized Belady) is scored by the same replay; the
hindsight LP gives the proven optimum of the tail excess latency (TEL).
"""

from pathlib import Path

import matplotlib.pyplot as plt

import optfleet

ROOT = next(p for p in (Path.cwd(), *Path.cwd().parents) if (p / "instances").is_dir())  # the repository
table = optfleet.gap(ROOT / "instances" / "caching" / "tiny.yaml")
print(table[["capacity_tokens", "method", "status", "objective", "bound", "hit_rate"]].to_string(index=False))

# %%
# TEL (ms) per policy at each capacity; the optimum is the LP's.

fig, ax = plt.subplots(figsize=(6, 3))
for capacity, group in table.groupby("capacity_tokens"):
    ax.plot(group["method"], group["objective"], marker="o", label=f"{capacity} tokens")
ax.set_ylabel("tail excess latency (ms)")
ax.tick_params(axis="x", rotation=45)
ax.legend(title="capacity")
fig.tight_layout()
