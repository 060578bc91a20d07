"""
Cache eviction policies against the hindsight optimum
=====================================================

The tiny conversation trace (``instances/caching/tiny.yaml``, a toy whose
answers are checked by hand in the tests) at two cache capacities. Each online policy (LRU, T-LRU and its variants) and the
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

fig, ax = plt.subplots(figsize=(7, 3))
capacities = sorted(table["capacity_tokens"].unique())
methods = list(dict.fromkeys(table["method"]))
width = 0.8 / len(capacities)
for i, capacity in enumerate(capacities):
    group = table[table["capacity_tokens"] == capacity].set_index("method").reindex(methods)
    ax.bar([m + i * width for m in range(len(methods))], group["objective"], width=width, label=f"{capacity} tokens")
ax.set_xticks([m + width * (len(capacities) - 1) / 2 for m in range(len(methods))], methods, rotation=45, ha="right")
ax.set_ylabel("tail excess latency (ms)")
ax.legend(title="capacity")
fig.tight_layout()
plt.show()
