"""Workloads: CDF tables read exactly, split rules, trace loading."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.errors import InputError
from optfleet.problems.fleet.workload.cdf import parse_cdf_points, read_cdf_file
from optfleet.problems.fleet.workload.mix import RequestMix, split_fixed_fraction, split_normal_fraction
from optfleet.problems.fleet.workload.trace import read_trace

from support import FLEET_INSTANCES, fleet_problem

pytestmark = pytest.mark.unit


@st.composite
def cdf_tables(draw):
    count = draw(st.integers(1, 8))
    widths = draw(st.lists(st.integers(1, 500), min_size=count, max_size=count))
    tokens = np.cumsum(widths).tolist()
    raw = draw(st.lists(st.floats(0, 1), min_size=count, max_size=count))
    cumulative = np.maximum.accumulate(raw).tolist()
    cumulative[-1] = 1.0
    return [[t, p] for t, p in zip(tokens, cumulative, strict=True)]


@given(cdf_tables())
@settings(max_examples=100, deadline=None)
def test_integer_lengths_reproduce_the_cdf_at_every_breakpoint(points):
    table = parse_cdf_points(points, "cdf")
    lengths, prob = table.integer_lengths()
    assert prob.sum() == pytest.approx(1.0)
    for tokens, cumulative in points:
        assert prob[lengths <= tokens].sum() == pytest.approx(cumulative, abs=1e-12)


def test_uniform_bins_give_the_exact_mean():
    table = parse_cdf_points([[10, 0.5], [30, 1.0]], "cdf")
    lengths, prob = table.integer_lengths()
    # Bin 1: uniform on 1..10 (mean 5.5); bin 2: uniform on 11..30 (mean 20.5).
    assert np.dot(lengths, prob) == pytest.approx(0.5 * 5.5 + 0.5 * 20.5)


@given(st.integers(1, 200_000), st.floats(0.01, 0.99))
def test_fixed_split_keeps_the_total_and_one_token_each_side(total, fraction):
    l_in, l_out = split_fixed_fraction(np.array([total]), fraction)
    assert l_in[0] + l_out[0] == total
    if total >= 2:
        assert l_in[0] >= 1 and l_out[0] >= 1
        assert abs(l_out[0] - fraction * total) <= 0.5 + 1e-9 or l_out[0] in (1, total - 1)


def test_normal_split_is_a_quadrature_of_the_clipped_normal():
    totals = np.array([1000])
    l_in, l_out, weight = split_normal_fraction(totals, np.array([1.0]), mean=0.1, sd=0.05, nodes=64)
    assert weight.sum() == pytest.approx(1.0)
    assert np.all(l_in + l_out == 1000)
    # The clipped normal's mean is close to 0.1 (clip at 0.02 lifts it a little).
    assert np.dot(weight, l_out) / 1000 == pytest.approx(0.1, abs=0.01)
    assert l_out.min() >= 20 and l_out.max() <= 950


def test_request_mix_merges_equal_pairs_and_sorts():
    mix = RequestMix.from_pairs(np.array([5, 1, 5]), np.array([1, 1, 1]), np.array([1.0, 1.0, 2.0]))
    assert mix.l_total.tolist() == [2, 6]
    assert mix.prob.tolist() == pytest.approx([0.25, 0.75])


def test_cdf_file_with_source_wrapper_is_read(tmp_path):
    table = read_cdf_file(FLEET_INSTANCES / "data" / "azure_2023_cdf.json", "cdf_file")
    assert table.tokens[-1] == 65536 and table.cumulative[-1] == 1.0


def test_csv_cdf_is_read(tmp_path):
    path = tmp_path / "cdf.csv"
    path.write_text("tokens,cumulative_probability\n100,0.25\n200,1\n")
    table = read_cdf_file(path, "cdf_file")
    assert table.tokens.tolist() == [100, 200] and table.cumulative.tolist() == [0.25, 1.0]


def test_generic_trace_and_azure_header(tmp_path):
    generic = tmp_path / "g.csv"
    generic.write_text("l_in,l_out,t,category\n100,20,0.0,code\n50,5,0.1,prose\n")
    trace = read_trace(generic, "trace")
    assert trace.l_in.tolist() == [100, 50] and trace.l_out.tolist() == [20, 5]
    azure = tmp_path / "a.csv"
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n")
    assert read_trace(azure, "trace").l_in.tolist() == [374]


def test_trace_without_token_columns_is_rejected(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="lacks column"):
        read_trace(path, "trace")


def test_paper_cdfs_are_exact_and_repeatable():
    first = fleet_problem("azure_2023").mix
    second = fleet_problem("azure_2023").mix
    assert np.array_equal(first.prob, second.prob)
    # The shipped table: F(4096) = 0.898 and F(6144) - F(4096) = 0.0776 (FleetOpt paper's figures).
    assert first.mass_at_most(4096) == pytest.approx(0.8982, abs=1e-4)
    assert first.mass_at_most(6144) - first.mass_at_most(4096) == pytest.approx(0.0776, abs=1e-4)


def test_raw_azure_trace_matches_the_published_statistics():
    mix = fleet_problem("azure_2023_trace").mix
    assert round(mix.mean_total_tokens()) == 1588
    cdf = np.cumsum(mix.prob)
    p99 = mix.l_total[np.searchsorted(cdf, 0.99)]
    assert p99 == 7445
    assert mix.mass_at_most(4096) == pytest.approx(0.898, abs=1e-3)
