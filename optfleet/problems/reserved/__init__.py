"""Reserved capacity (provisioned throughput units): windowed units, latency, and exact hybrid models."""
