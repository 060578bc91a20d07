"""
Heuristic fleets against the proven optimum
===========================================

The toy fleet (``instances/fleet/toy.yaml``) has an answer computed by hand:
two request sizes, a flat 1 ms iteration, and a utilisation cap that decides
every pool. ``optfleet.gap`` runs every heuristic and the exact MILP, scores
every plan with the one evaluator, and reports each plan's gap to the MILP's
proven bound.
"""

from pathlib import Path

import matplotlib.pyplot as plt

import optfleet

ROOT = next(p for p in (Path.cwd(), *Path.cwd().parents) if (p / "instances").is_dir())  # the repository
table = optfleet.gap(ROOT / "instances" / "fleet" / "toy.yaml")
print(table[["method", "status", "objective", "bound", "gap_pct", "pools"]].to_string(index=False))

# %%
# Each bar is a plan's cost in $/h; the line is the MILP's proven lower bound
# on the cost of any plan of this instance.

scored = table[table["objective"].notna()]
fig, ax = plt.subplots(figsize=(6, 3))
ax.bar(scored["method"], scored["objective"], color="#4c72b0")
ax.axhline(float(scored["bound"].dropna().iloc[0]), color="black", linestyle="--", label="proven bound")
ax.set_ylabel("cost ($/h)")
ax.set_title("toy fleet: every method, one evaluator")
ax.legend()
fig.tight_layout()
plt.show()
