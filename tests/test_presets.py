"""Hardware profiles and presets: what they fill in, what they override."""

from __future__ import annotations

import pytest

from optfleet.problems.fleet.presets import apply_defaults

from support import fleet_problem

pytestmark = pytest.mark.unit


def test_fleetopt_profile_slots_and_iteration():
    problem = fleet_problem("azure_2023")
    long, short = problem.pool(65536), problem.pool(4096)
    assert (long.slots_per_instance, short.slots_per_instance) == (16, 256)
    assert float(long.iteration_ms(0)) == pytest.approx(8 + 0.65 * 16)
    assert long.cost_per_instance_hour == 2.21 and long.chunk_tokens == 512


def test_fleetsim_preset_switches_the_service_model():
    problem = fleet_problem("azure_2023", "fleetsim_compatible")
    # inference-fleet-sim's slot formula min(128*8192 // C, 65536 // ceil(C/16)).
    assert [problem.pool(c).slots_per_instance for c in (65536, 8192, 6144, 1536)] == [16, 128, 170, 682]
    assert problem.ttft_rule == "fleetsim"
    # Length-scaled iteration: W + H n_max L / 8192.
    assert float(problem.pool(8192).iteration_ms(4096)) == pytest.approx(8 + 0.65 * 128 * 0.5)


def test_profile_fills_only_what_the_file_leaves_out():
    data = {"hardware": {"profile": "fleetopt_a100_llama3_70b", "iteration": {"w_ms": 5.0}}, "cost": {"cost_per_gpu_hour": 3.0}}
    merged = apply_defaults(data)
    assert merged["hardware"]["iteration"] == {"w_ms": 5.0, "h_ms_per_slot": 0.65, "chunk_tokens": 512, "scaling": "flat"}
    assert merged["cost"]["cost_per_gpu_hour"] == 3.0


def test_preset_overrides_the_fields_it_names_and_replaces_alternative_blocks():
    data = {
        "preset": "fleetsim_compatible",
        "workload": {"rate_rps": 5, "split": {"rule": "output_fraction_normal", "mean": 0.3}},
        "hardware": {"profile": "fleetopt_a100_llama3_70b"},
        "slo": {"ttft_p99_ms": 100},
    }
    merged = apply_defaults(data)
    assert merged["workload"] == {"rate_rps": 5, "split": {"rule": "fixed_output_fraction", "output_fraction": 0.2}}
    assert merged["hardware"]["slots"] == {"formula": "fleetsim"}
    assert merged["hardware"]["iteration"]["scaling"] == "length_scaled"
    assert merged["slo"] == {"ttft_p99_ms": 100, "ttft_rule": "fleetsim"}
