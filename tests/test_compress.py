"""The extractive compressor (optfleet.compress): splitting, token counts, the composite score on a hand-worked
text, PageRank's parameters, the keep rules, the cap, the greedy fill and the guarantee ``T_c + L_out = B``."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.compress import Objective, approx_tokens, compress, prepare, split_sentences
from optfleet.compress import scoring
from optfleet.compress.scoring import score_sentences, smoothed_idf, term_counts, textrank
from optfleet.compress.selection import candidate_indices, greedy_selection, keep_mask, selection_value
from optfleet.compress.text import terms, terms_of
from optfleet.errors import InputError

pytest.importorskip("sklearn")
pytestmark = pytest.mark.unit

WORDS = ["cache", "pool", "token", "budget", "route", "short", "long", "fleet", "gpu", "slot", "queue", "prompt"]


def prose(sentence_words: list[list[str]]) -> str:
    """A text of one sentence per word list, each ending with a full stop."""
    return " ".join(" ".join(words).capitalize() + "." for words in sentence_words)


random_texts = st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12), min_size=6, max_size=40).map(prose)


def test_split_handles_abbreviations_decimals_initials_cjk_and_blank_lines():
    text = ('Pools differ, e.g. in windows. J. Smith measured 3.14 ms! Really?" Yes.\n\nA heading\n\n'
            "中文句子。第二句！Then English.")
    assert [s.text for s in split_sentences(text)] == [
        "Pools differ, e.g. in windows.", "J. Smith measured 3.14 ms!", 'Really?"', "Yes.", "A heading", "中文句子。", "第二句！",
        "Then English."]
    for sentence in split_sentences(text):
        assert text[sentence.start:sentence.end] == sentence.text


def test_approx_tokens_is_1_3_per_word_and_1_5_per_cjk_character_rounded_up():
    assert approx_tokens("one two three four five six seven eight nine ten") == 13
    assert approx_tokens("one") == 2  # ceil(1.3)
    assert approx_tokens("中文") == 3  # 2 characters
    assert approx_tokens("Python函数") == 5  # ceil(1.3 + 3.0): a mixed word counts once as a word, its CJK characters too
    assert terms("Hello, 中文句 world") == ["hello", "中", "文", "句", "中文", "文句", "world"]


@given(st.lists(st.text(alphabet="ab 中文.\n", min_size=0, max_size=20), min_size=1, max_size=6))
def test_default_count_is_subadditive_over_joined_pieces(pieces):
    assert approx_tokens(" ".join(pieces)) <= sum(approx_tokens(p) for p in pieces)


RANGE_EDGES = [chr(c) for c in (0x10FF, 0x1100, 0x11FF, 0x1200, 0x303F, 0x3040, 0x30FF, 0x3100, 0x3130, 0x318F, 0x3190, 0x33FF,
                                0x3400, 0x4DBF, 0x4DC0, 0x4E00, 0x9FFF, 0xA000, 0xABFF, 0xAC00, 0xD7AF, 0xD7B0, 0xF8FF, 0xF900,
                                0xFAFF, 0xFB00, 0x1FFFF, 0x20000, 0x2FFFF, 0x30000, 0x2019)]


@given(st.lists(st.sampled_from(RANGE_EDGES), max_size=4), st.integers(0, 3000))
def test_cjk_test_of_a_long_text_agrees_with_the_character_class_of_short_ones(inserted, at):
    """Long texts are tested by their code points against the range edges, short ones by the regex class."""
    from optfleet.compress import text as text_module

    filler = "It’s a word. " * 300  # above the long-text length, not ASCII
    long_text = filler[:at] + "".join(inserted) + filler[at:]
    assert len(long_text) >= text_module._LONG_TEXT
    assert text_module.has_cjk(long_text) == (text_module._CJK_CHARACTER.search(long_text) is not None)
    assert text_module.has_cjk(long_text) == any(text_module.has_cjk(c) for c in inserted)


def test_the_whitespace_table_is_what_str_split_splits_at():
    from optfleet.compress import text as text_module

    assert [ord(c) for c in text_module._WHITESPACE] == [code for code in range(sys.maxunicode + 1) if chr(code).isspace()]


@given(st.text(alphabet="ab’中 \t\n\x85\xa0\u2009\u3000", max_size=40), st.integers(0, 5))
def test_a_long_texts_token_count_is_the_split_words_count(tail, lead):
    """Long texts have their words counted on their code points; the count is still ``len(text.split())``'s."""
    from optfleet.compress import text as text_module

    long_text = " " * lead + "It’s a word.\u3000" * 200 + tail
    assert len(long_text) >= text_module._LONG_TEXT
    assert text_module._word_count(long_text) == len(long_text.split())
    if not text_module.has_cjk(long_text):
        assert approx_tokens(long_text) == -(-13 * len(long_text.split()) // 10)  # ceil(1.3 w)


sentence_texts = st.lists(st.text(alphabet="Ab_1 .,’é中文ß\n\t-'(Z9!", max_size=25), min_size=1, max_size=12)


@given(sentence_texts)
def test_terms_of_many_sentences_are_each_sentences_terms(sentences):
    """The ASCII sentences are translated together (a translation table, not the regex of :func:`terms`); every
    sentence still gets its own terms, the regex's."""
    assert terms_of(sentences) == [terms(sentence) for sentence in sentences]


@settings(max_examples=40, deadline=None)
@given(sentence_texts)
def test_term_counts_are_scikit_learns_count_vectorizer_counts(sentences):
    """Column ``k`` of the count matrix is the term first met at position ``k`` of all the terms in order; its
    counts are scikit-learn's ``CountVectorizer`` counts of that term."""
    from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer

    matrix = term_counts(sentences)
    counts = matrix.toarray()
    everything = [term for sentence in sentences for term in terms(sentence)]
    if not everything:
        assert counts.shape == (len(sentences), 1) and not counts.any()
        return
    vectorizer = CountVectorizer(analyzer=terms)
    reference = vectorizer.fit_transform(sentences).toarray()
    columns = {term: everything.index(term) for term in vectorizer.vocabulary_}
    idf, reference_idf = smoothed_idf(matrix), TfidfTransformer().fit(reference).idf_ - 1.0
    for term, column in vectorizer.vocabulary_.items():
        np.testing.assert_array_equal(counts[:, columns[term]], reference[:, column])
        assert idf[columns[term]] == pytest.approx(reference_idf[column], rel=1e-15)  # document frequencies: repeats summed
    assert counts.sum() == reference.sum()  # no other counts: the remaining columns are empty


def test_composite_score_on_a_hand_worked_text():
    """Three sentences {cat, dog}, {cat, bird}, {fish}; n = 3, df(cat) = 2, every other term df = 1.

    TF-IDF: ln(4/3)/2 + ln 2/2 for the first two, ln 2 for the third; scaled by the max (ln 2).
    TextRank: the first two are linked (cosine 1/2), fish is dangling.  PageRank's fixed point with d = 0.85:
    fish b = 0.05 + 0.85 b / 3 -> b = 3/43, the others a = (1 - b)/2 = 20/43; scaled: 1, 1, 3/20.
    Novelty: centroid (cat 1/3, dog 1/6, bird 1/6, fish 1/3), |c| = sqrt(10)/6; cos = 3/sqrt(20) for the
    first two and 2/sqrt(10) for fish; scaled by fish's 1 - 2/sqrt(10).  Position: 1, 1/2, 1.
    """
    scores = score_sentences(["cat dog.", "cat bird.", "fish."])
    tfidf_first = (math.log(4 / 3) / 2 + math.log(2) / 2) / math.log(2)
    novelty_first = (1 - 3 / math.sqrt(20)) / (1 - 2 / math.sqrt(10))
    np.testing.assert_allclose(scores.tfidf, [tfidf_first, tfidf_first, 1.0], rtol=1e-12)
    np.testing.assert_allclose(scores.textrank, [1.0, 1.0, 3 / 20], atol=1e-4)  # to networkx's tolerance
    np.testing.assert_allclose(scores.novelty, [novelty_first, novelty_first, 1.0], rtol=1e-12)
    np.testing.assert_allclose(scores.position, [1.0, 0.5, 1.0], atol=1e-15)
    expected_first = 0.20 * 1.0 + 0.40 * 1.0 + 0.35 * tfidf_first + 0.05 * novelty_first
    expected_fish = 0.20 * 3 / 20 + 0.40 * 1.0 + 0.35 * 1.0 + 0.05 * 1.0
    np.testing.assert_allclose(scores.composite, [expected_first, 0.20 + 0.40 * 0.5 + 0.35 * tfidf_first + 0.05 * novelty_first,
                                                  expected_fish], atol=1e-4)


def test_pagerank_runs_with_the_papers_parameters_and_reaches_its_fixed_point():
    assert (scoring.DAMPING, scoring.MAX_ITERATIONS, scoring.TOLERANCE) == (0.85, 100, 1e-5)
    similarity = score_sentences([f"{a} {b}." for a, b in zip(WORDS, WORDS[3:] + WORDS[:3], strict=True)]).similarity
    rank = textrank(similarity)
    n = len(rank)
    out = similarity.sum(axis=1)
    dangling = out == 0
    transition = np.divide(similarity, out[:, None], out=np.zeros_like(similarity), where=out[:, None] > 0)
    fixed_point = (1 - 0.85) / n + 0.85 * (transition.T @ rank + rank[dangling].sum() / n)
    assert np.abs(fixed_point - rank).sum() < 1e-5  # the L1 stopping rule, met by the returned vector
    assert rank.sum() == pytest.approx(1.0)


random_graphs = st.tuples(st.integers(2, 40), st.floats(0.0, 1.0), st.integers(0, 2**32 - 1))


def similarity_graph(n: int, density: float, seed: int) -> np.ndarray:
    """A random symmetric similarity matrix with zero diagonal; at low density some sentences are dangling."""
    rng = np.random.default_rng(seed)
    weights = np.triu(rng.random((n, n)) * (rng.random((n, n)) < density), 1)
    return weights + weights.T


@settings(max_examples=40, deadline=None)
@given(graph=random_graphs)
def test_textrank_is_networkx_pagerank_with_dangling_sentences_sent_uniformly(graph):
    """The same fixed point as networkx's PageRank (its default dangling rule) on random symmetric similarity
    graphs, dangling sentences included.  The power iteration stops at an L1 step below ``tol`` and returns the
    iterate before that step; a damped step contracts by ``d``, so that iterate is within ``tol / (1 - d)`` of the
    fixed point in L1 (networkx's reference is run to 1e-12)."""
    import networkx as nx

    similarity = similarity_graph(*graph)
    reference = nx.pagerank(nx.from_numpy_array(similarity), alpha=0.85, max_iter=1000, tol=1e-12)
    assert np.abs(textrank(similarity) - [reference[i] for i in range(len(similarity))]).sum() <= 1e-5 / (1 - 0.85) + 1e-9


@settings(max_examples=40, deadline=None)
@given(graph=random_graphs)
def test_textrank_is_scikit_network_pagerank_step_for_step(graph):
    """The same iterates as scikit-network's ``PageRank(solver="piteration")`` with the paper's parameters on the
    graph whose dangling rows link to every sentence (what the compressor ran before it iterated on the dense
    matrix itself): equal to rounding, not just to the tolerance."""
    from sknetwork.ranking import PageRank

    similarity = similarity_graph(*graph)
    adjacency = similarity.copy()
    adjacency[~adjacency.any(axis=1)] = 1.0
    reference = PageRank(damping_factor=0.85, solver="piteration", n_iter=100, tol=1e-5).fit_predict(adjacency)
    np.testing.assert_allclose(textrank(similarity), reference, rtol=1e-10, atol=1e-14)


def test_keep_rules_and_cap_keep_the_first_three_and_last_two():
    assert keep_mask(8).tolist() == [True, True, True, False, False, False, True, True]
    assert keep_mask(4).all()
    picked = candidate_indices(1234)
    assert len(picked) == 500 and len(set(picked.tolist())) == 500 and np.all(np.diff(picked) > 0)
    assert picked[:3].tolist() == [0, 1, 2] and picked[-2:].tolist() == [1232, 1233]
    np.testing.assert_array_equal(candidate_indices(40), np.arange(40))


def test_greedy_fills_by_score_and_passes_over_what_does_not_fit():
    scores = np.array([0.1, 0.1, 0.1, 0.9, 0.8, 0.7, 0.6, 0.1, 0.1])
    tokens = np.array([1, 1, 1, 5, 9, 2, 2, 1, 1])
    keep = keep_mask(9)
    chosen = greedy_selection(scores, tokens, keep, budget_tokens=5 + 5 + 2)  # kept 5, then 0.9 (5), 0.8 does not fit, 0.7 (2)
    assert np.flatnonzero(chosen).tolist() == [0, 1, 2, 3, 5, 7, 8]
    assert selection_value(chosen, scores, np.zeros((9, 9)), Objective()) == pytest.approx(0.5 + 0.9 + 0.7)
    by_density = greedy_selection(scores, tokens, keep, budget_tokens=12, per_token=True)  # 0.7/2 and 0.6/2 before 0.9/5
    assert np.flatnonzero(by_density).tolist() == [0, 1, 2, 5, 6, 7, 8]


@settings(max_examples=40, deadline=None)
@given(text=random_texts, budget=st.integers(1, 400), output=st.integers(0, 200))
def test_every_compressed_request_meets_t_c_plus_l_out_equals_b(text, budget, output):
    if output >= budget:
        with pytest.raises(InputError):
            compress(text, budget, output)
        return
    try:
        result = compress(text, budget, output)
    except InputError as exc:
        assert exc.field == "budget_tokens" and "always kept" in exc.problem
        assert prepare(text).kept_tokens > budget - output
        return
    assert result.prompt_budget_tokens + result.output_tokens == budget
    assert result.compressed_tokens <= result.prompt_budget_tokens
    assert result.compressed_tokens == approx_tokens(result.text)
    if result.compressed:
        sentences = [s.text for s in split_sentences(text)]
        assert {0, 1, 2, len(sentences) - 2, len(sentences) - 1} <= set(result.kept_sentences)
        assert [sentences[i] for i in result.kept_sentences] == [s.text for s in split_sentences(result.text)]


@settings(max_examples=25, deadline=None)
@given(text=random_texts, budget=st.integers(60, 400))
def test_guarantee_holds_for_a_counter_that_is_not_subadditive(text, budget):
    """Counting characters: a joined text counts above its parts (the separators), so the selection is redone."""
    try:
        result = compress(text, budget, counter=len)
    except InputError as exc:
        assert exc.field == "budget_tokens"
        return
    assert len(result.text) <= budget


def test_category_gate_never_compresses_code_and_texts_that_fit_pass_unchanged():
    text = prose([["token", "budget"]] * 12)
    code = compress(text, 10, category="code")
    assert (code.compressed, code.fits, code.text) == (False, False, text)
    fits = compress(text, 1000, 24)
    assert (fits.compressed, fits.fits, fits.text) == (False, True, text)
    assert compress(text, 30, category="rag").compressed


@pytest.mark.parametrize(("arguments", "field"), [
    (("", 100), "text"), (("   \n", 100), "text"), (("A. B. C. D. E. F.", 0), "budget_tokens"),
    (("A. B. C. D. E. F.", -5), "budget_tokens"), (("A. B. C. D. E. F.", 10, 10), "output_tokens"),
    (("A. B. C. D. E. F.", 10, -1), "output_tokens"), (("one sentence with no boundary at all " * 9, 10), "text"),
    ((prose([["token", "budget", "route"]] * 8), 12), "budget_tokens"),
])
def test_bad_inputs_name_the_field(arguments, field):
    with pytest.raises(InputError) as raised:
        compress(*arguments)
    assert raised.value.field == field


def test_unknown_category_and_method_are_refused():
    with pytest.raises(InputError, match="category"):
        compress("A b. C d.", 5, category="poetry")
    with pytest.raises(InputError, match="method"):
        compress("A b. C d.", 5, method="magic")
