"""Prefill/decode-disaggregated fleets (xPyD): aggregated or disaggregated pools, sized exactly at percentile TTFT and TPOT."""
