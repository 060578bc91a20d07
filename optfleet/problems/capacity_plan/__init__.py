"""The ``capacity_plan`` kind: GPU purchases over periods for several models (reserved, on-demand, spot)."""
