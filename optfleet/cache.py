"""Where optfleet keeps what it computes or downloads once: the user's cache folder.

``$OPTFLEET_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/optfleet``, else ``~/.cache/optfleet``.  Each user of it
keeps its own subfolder: ``measured`` (aiconfigurator tables, optfleet.engine.measured), ``datasets`` (fetched
datasets, optfleet.datasets).
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The cache folder (module docstring); it is not created here."""
    root = os.environ.get("OPTFLEET_CACHE_DIR")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "optfleet"
