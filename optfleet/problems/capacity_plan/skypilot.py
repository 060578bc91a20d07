"""Prices per GPU-hour from a SkyPilot catalog's VM table (``vms.csv`` of skypilot-org/skypilot-catalog; schema v5
and later).  The columns read:

* ``InstanceType``, ``Region``: the row(s) of the instance asked for (one per availability zone);
* ``AcceleratorName``, ``AcceleratorCount``: the GPU and how many the instance holds;
* ``Price``: the on-demand $ per instance-hour; ``SpotPrice``: the spot $ per instance-hour (empty where the zone
  sells no spot).

A GPU's price is the instance's over ``AcceleratorCount``: the on-demand price of the region (the same in every
zone; the lowest is taken), and the lowest spot price among its zones (as SkyPilot prices spot).  The instance's
``AcceleratorName`` must name the GPU type's catalog GPU (compared without case, ``-``, ``_`` or spaces, as a
prefix: SkyPilot's ``H100`` is ``H100-SXM``).  Large catalogs are read by path; none ships with optfleet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from optfleet.errors import InputError
from optfleet.instance.data_files import require_data_file

COLUMNS = ("InstanceType", "AcceleratorName", "AcceleratorCount", "Price", "SpotPrice", "Region")


@dataclass(frozen=True)
class CatalogPrices:
    """$ per GPU-hour of one instance type in one region (``spot_per_gpu_hour`` None when no zone sells spot)."""

    on_demand_per_gpu_hour: float
    spot_per_gpu_hour: float | None
    accelerator: str
    gpus_per_instance: int


def _key(name: str) -> str:
    return re.sub(r"[-_\s]", "", name).lower()


def catalog_prices(path: Path, instance_type: str, region: str, gpu: str, field: str) -> CatalogPrices:
    """The prices of ``instance_type`` in ``region`` (module docstring); InputError names ``field``'s part."""
    import pandas as pd

    require_data_file(path, f"{field}.file")
    try:
        frame = pd.read_csv(path)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{field}.file", str(path), f"cannot be read as a CSV table: {exc}") from None
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"{field}.file", str(path), f"has no column {', '.join(missing)} (a SkyPilot vms.csv has {', '.join(COLUMNS)})")
    rows = frame[(frame["InstanceType"].astype(str) == instance_type) & (frame["Region"].astype(str) == region)]
    if rows.empty:
        where = sorted(frame.loc[frame["InstanceType"].astype(str) == instance_type, "Region"].astype(str).unique())
        raise InputError(f"{field}.instance_type", instance_type, f"has no row in region {region} of {path.name}"
                         + (f" (its regions: {', '.join(where[:8])})" if where else " (no such instance type)"))
    accelerator = str(rows["AcceleratorName"].iloc[0])
    if not _key(gpu).startswith(_key(accelerator)) or not accelerator.strip():
        raise InputError(f"{field}.instance_type", instance_type, f"holds {accelerator}, not the GPU type's {gpu}")
    count = pd.to_numeric(rows["AcceleratorCount"], errors="coerce").iloc[0]
    price = pd.to_numeric(rows["Price"], errors="coerce").min()
    if not count >= 1 or not price >= 0:
        raise InputError(f"{field}.instance_type", instance_type, f"has no on-demand Price or AcceleratorCount in {path.name}")
    spot = pd.to_numeric(rows["SpotPrice"], errors="coerce").dropna()
    spot = spot[spot >= 0]
    return CatalogPrices(float(price) / float(count), None if spot.empty else float(spot.min()) / float(count), accelerator, int(count))
