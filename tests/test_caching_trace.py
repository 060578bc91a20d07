"""Conversation traces: the CSV / JSONL / Parquet loaders and the seeded generator of the paper's model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from optfleet.problems.caching.generate import ConversationModel, LengthModel, generate_trace
from optfleet.problems.caching.load import load_trace
from optfleet.errors import InputError

from support import REPO

pytestmark = pytest.mark.unit

TINY_CSV = REPO / "instances" / "caching" / "tiny.csv"


def _same_trace(a, b) -> None:
    for name in ("conversation", "arrival_s", "prompt_tokens", "answer_tokens", "history_tokens", "next_turn", "prev_turn"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.conversation_labels == b.conversation_labels


def test_csv_loader_derives_event_order_histories_and_links():
    trace = load_trace(TINY_CSV)
    assert trace.conversation_labels == ("A", "B", "C")
    np.testing.assert_array_equal(trace.history_tokens, [0, 0, 0, 60, 80])
    np.testing.assert_array_equal(trace.history_after_tokens, [60, 80, 40, 120, 120])
    np.testing.assert_array_equal(trace.next_turn, [3, 4, -1, -1, -1])


def test_jsonl_and_parquet_give_the_same_trace(tmp_path):
    frame = pd.read_csv(TINY_CSV, dtype={"conversation_id": str})
    jsonl = tmp_path / "tiny.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in frame.to_dict(orient="records")) + "\n")
    _same_trace(load_trace(jsonl), load_trace(TINY_CSV))
    pytest.importorskip("pyarrow")
    parquet = tmp_path / "tiny.parquet"
    frame.to_parquet(parquet)
    _same_trace(load_trace(parquet), load_trace(TINY_CSV))


def test_extra_columns_are_ignored_and_rows_may_interleave(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("note,conversation_id,t,q,a\nx,b,1.5,5,1\ny,a,0,3,2\nz,b,2,4,4\n")
    trace = load_trace(path)
    assert trace.conversation_labels == ("b", "a")  # ids by first appearance in the file
    np.testing.assert_array_equal(trace.arrival_s, [0.0, 1.5, 2.0])
    np.testing.assert_array_equal(trace.history_tokens, [0, 0, 6])


@pytest.mark.parametrize(("text", "field", "fragment"), [
    ("conversation_id,t,q\na,0,1\n", "trace.file", "missing column(s) a"),
    ("conversation_id,t,q,a\na,zero,1,1\n", "trace.t", "not a number"),
    ("conversation_id,t,q,a\na,0,-3,1\n", "trace.q", "integers >= 0"),
    ("conversation_id,t,q,a\na,0,1,2.5\n", "trace.a", "integers >= 0"),
    ("conversation_id,t,q,a\na,5,1,1\na,4,1,1\n", "trace.t", "goes back in time"),
    ("conversation_id,t,q,a\n", "trace", "no turns"),
    ("", "trace.file", "empty"),
])
def test_bad_trace_files_name_the_column(tmp_path, text, field, fragment):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_trace(path)
    assert info.value.field == field and fragment in str(info.value)


def test_unknown_format_and_missing_file(tmp_path):
    with pytest.raises(InputError, match="unknown trace format"):
        load_trace(tmp_path / "x.txt")
    with pytest.raises(InputError, match="file not found"):
        load_trace(tmp_path / "x.csv")


SHAREGPT_LIKE = ConversationModel.from_summary(
    1.0, 3.5, 1 / 3, LengthModel("lognormal", 100.0, 1.0), LengthModel("geometric", 250.0))


def test_generator_is_reproducible_per_seed():
    a = generate_trace(SHAREGPT_LIKE, 500, seed=7)
    _same_trace(a, generate_trace(SHAREGPT_LIKE, 500, seed=7))
    b = generate_trace(SHAREGPT_LIKE, 500, seed=8)
    assert len(a) != len(b) or not np.array_equal(a.arrival_s, b.arrival_s)


def test_from_summary_inverts_mean_turns_and_gap():
    m = SHAREGPT_LIKE
    assert m.mean_turns == pytest.approx(3.5) and m.mean_gap_s == pytest.approx(1 / 3)
    assert m.turn_rate_per_s == pytest.approx(15 / 7) and m.end_rate_per_s == pytest.approx(6 / 7)


def test_generator_means_match_the_model():
    """40,000 conversations (~140,000 turns): every empirical mean within 2 % (about 5 standard errors)."""
    model = SHAREGPT_LIKE
    trace = generate_trace(model, 40_000, seed=3)
    turns = len(trace) / trace.n_conversations
    has_next = trace.next_turn >= 0
    gaps = trace.arrival_s[trace.next_turn[has_next]] - trace.arrival_s[has_next]
    births = np.sort(trace.arrival_s[trace.turn_index == 0])
    assert turns == pytest.approx(model.mean_turns, rel=0.02)
    assert gaps.mean() == pytest.approx(model.mean_gap_s, rel=0.02)
    assert np.diff(births).mean() == pytest.approx(1 / model.conversation_rate_per_s, rel=0.02)
    assert trace.prompt_tokens.mean() == pytest.approx(100.0, rel=0.02)
    assert trace.answer_tokens.mean() == pytest.approx(250.0, rel=0.02)  # geometric: exact mean
    assert trace.prompt_tokens.min() >= 1 and trace.answer_tokens.min() >= 1
    # Turns per conversation are 1 + Geometric: P(N = 1) = mu / (lambda + mu).
    counts = np.bincount(trace.conversation)
    assert np.mean(counts == 1) == pytest.approx(model.end_rate_per_s / (model.turn_rate_per_s + model.end_rate_per_s), abs=0.01)


def test_rate_parametrisation_and_single_turn_conversations():
    model = ConversationModel(2.0, 0.0, 1.0, LengthModel("constant", 10), LengthModel("constant", 5))
    trace = generate_trace(model, 100, seed=0)
    assert len(trace) == 100 and trace.n_conversations == 100
    assert set(trace.prompt_tokens.tolist()) == {10} and set(trace.answer_tokens.tolist()) == {5}


def test_empirical_lengths_draw_only_table_values_with_their_weights():
    rng = np.random.default_rng(0)
    lengths = LengthModel("empirical", values_tokens=(10, 100, 1000), weights=(0.5, 0.3, 0.2))
    draws = lengths.sample(rng, 50_000)
    assert set(np.unique(draws).tolist()) == {10, 100, 1000}
    assert np.mean(draws == 10) == pytest.approx(0.5, abs=0.01)
    assert lengths.expected_tokens == pytest.approx(0.5 * 10 + 0.3 * 100 + 0.2 * 1000)


@pytest.mark.parametrize(("build", "field"), [
    (lambda: LengthModel("lognormal", 0.5), "lengths.mean_tokens"),
    (lambda: LengthModel("lognormal", 100, sigma=0.0), "lengths.sigma"),
    (lambda: LengthModel("empirical"), "lengths.values_tokens"),
    (lambda: LengthModel("empirical", values_tokens=(1, 2), weights=(1.0,)), "lengths.weights"),
    (lambda: ConversationModel(0.0, 1.0, 1.0, LengthModel("constant", 1), LengthModel("constant", 1)), "generator.conversation_rate_per_s"),
    (lambda: ConversationModel(1.0, 1.0, 0.0, LengthModel("constant", 1), LengthModel("constant", 1)), "generator.end_rate_per_s"),
    (lambda: generate_trace(SHAREGPT_LIKE, 0, seed=0), "generator.conversations"),
])
def test_bad_model_parameters_are_input_errors(build, field):
    with pytest.raises(InputError) as info:
        build()
    assert info.value.field == field


@pytest.mark.slow
def test_generator_makes_a_million_turns():
    trace = generate_trace(SHAREGPT_LIKE, 285_715, seed=1)
    assert len(trace) == pytest.approx(1_000_000, rel=0.01)


def test_tiny_csv_is_the_documented_trace():
    assert Path(TINY_CSV).read_text().splitlines()[0] == "conversation_id,t,q,a"
