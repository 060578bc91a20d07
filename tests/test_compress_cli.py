"""``optfleet compress``: stdout is the text sent (or one JSON document), bad input exits 2 naming the option and
the value; the fidelity metrics (ROUGE-L recall against the rouge-score library, TF-IDF cosine); the corpus."""

from __future__ import annotations

import json
import random

import pytest

from optfleet.cli import main
from optfleet.compress import approx_tokens
from optfleet.compress.corpus import borderline_requests
from optfleet.compress.fidelity import fidelity, lcs_length, rouge_l_recall
from optfleet.errors import EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_OK

pytest.importorskip("sklearn")
pytest.importorskip("rouge_score")
pytestmark = pytest.mark.unit

TEXT = " ".join(f"Pool {i} serves {'short' if i % 2 else 'long'} prompts with {i} slots per GPU." for i in range(30))


@pytest.fixture
def prompt_file(tmp_path):
    path = tmp_path / "prompt.txt"
    path.write_text(TEXT)
    return path


def test_text_output_is_the_compressed_prompt(prompt_file, capsys):
    assert main(["compress", str(prompt_file), "--budget-tokens", "200", "--output-tokens", "40"]) == EXIT_OK
    captured = capsys.readouterr()
    assert approx_tokens(captured.out) <= 160 < approx_tokens(TEXT)
    assert captured.out.startswith("Pool 0 serves long prompts") and "+ 40 output <= B = 200" in captured.err


def test_the_exact_summary_says_who_proved_the_optimum(prompt_file, capsys):
    assert main(["compress", str(prompt_file), "--budget-tokens", "200", "--output-tokens", "40", "--exact"]) == EXIT_OK
    assert "MILP (optimum by the knapsack's dynamic program, checked by HiGHS) optimal" in capsys.readouterr().err


def test_json_output_is_one_document_with_the_guarantee(prompt_file, capsys):
    assert main(["compress", str(prompt_file), "--budget-tokens", "200", "--output-tokens", "40", "--exact", "--json", "--quiet"]) == EXIT_OK
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert captured.err == ""
    assert data["prompt_budget_tokens"] + data["output_tokens"] == data["budget_tokens"] == 200
    assert data["compressed_tokens"] <= data["prompt_budget_tokens"] and data["compressed"]
    assert data["solve"]["status"] == "optimal" and data["greedy_gap_pct"] >= -1e-9
    assert 0 < data["fidelity"]["rouge_l_recall"] < 1 and data["fidelity"]["token_reduction"] == pytest.approx(data["token_reduction"])


def test_code_is_never_compressed_and_exits_1(prompt_file, capsys):
    assert main(["compress", str(prompt_file), "--budget-tokens", "200", "--category", "code", "--json"]) == EXIT_INFEASIBLE
    data = json.loads(capsys.readouterr().out)
    assert (data["compressed"], data["fits"], data["text"]) == (False, False, TEXT)


@pytest.mark.parametrize(("content", "options", "field", "value"), [
    ("", ["--budget-tokens", "100"], "FILE", None),
    ("no sentence boundary here at all " * 20, ["--budget-tokens", "10"], "FILE", None),
    (TEXT, ["--budget-tokens", "0"], "--budget-tokens", "0"),
    (TEXT, ["--budget-tokens", "-3"], "--budget-tokens", "-3"),
    (TEXT, ["--budget-tokens", "30"], "--budget-tokens", "30"),  # below the first 3 and last 2 sentences
    (TEXT, ["--budget-tokens", "100", "--output-tokens", "100"], "--output-tokens", "100"),
    (TEXT, ["--budget-tokens", "100", "--category", "poetry"], "--category", "'poetry'"),
    (TEXT, ["--budget-tokens", "100", "--exact", "--time-limit", "0"], "--time-limit", "0.0"),
])
def test_bad_input_exits_2_naming_the_option_and_value(tmp_path, capsys, content, options, field, value):
    path = tmp_path / "prompt.txt"
    path.write_text(content)
    assert main(["compress", str(path), *options]) == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"error: {field} = {value if value is not None else repr(str(path))}:")


def test_a_text_without_terms_compresses_with_the_tfidf_cosine_undefined(tmp_path, capsys):
    # scikit-learn's tokens are runs of two or more word characters: ". . ." has none (no crash, exit 0)
    path = tmp_path / "dots.txt"
    path.write_text(". " * 50)
    assert main(["compress", str(path), "--budget-tokens", "20", "--json"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert data["fidelity"]["tfidf_cosine"] is None


def test_missing_file_exits_2(tmp_path, capsys):
    assert main(["compress", str(tmp_path / "absent.txt"), "--budget-tokens", "100"]) == EXIT_BAD_INPUT
    assert "FILE" in capsys.readouterr().err


def test_lcs_matches_the_rouge_score_library():
    from rouge_score.rouge_scorer import RougeScorer

    scorer = RougeScorer(["rougeL"])
    rng = random.Random(7)
    for _ in range(300):
        a = " ".join(rng.choice("abcde") for _ in range(rng.randint(0, 40)))
        b = " ".join(rng.choice("abcdef") for _ in range(rng.randint(0, 40)))
        assert rouge_l_recall(a, b) == pytest.approx(scorer.score(a, b)["rougeL"].recall, abs=1e-12)
    assert lcs_length(list("ABCBDAB"), list("BDCABA")) == 4  # the textbook pair (Cormen et al.)


def test_fidelity_of_an_extract_and_of_the_text_itself():
    sentences = TEXT.split(". ")
    extract = ". ".join(sentences[::2])
    kept = fidelity(TEXT, extract)
    assert kept.rouge_l_recall == pytest.approx(len(extract.split()) / len(TEXT.split()), abs=0.02)
    assert 0.5 < kept.tfidf_cosine < 1 and kept.token_reduction > 0.3
    same = fidelity(TEXT, TEXT)
    assert (same.rouge_l_recall, same.token_reduction) == (1.0, 0.0) and same.tfidf_cosine == pytest.approx(1.0)


def test_corpus_requests_fall_in_the_borderline_band():
    requests = borderline_requests(4, budget_tokens=8192, gamma=1.5, output_tokens=512, seed=3)
    assert requests == borderline_requests(4, budget_tokens=8192, gamma=1.5, output_tokens=512, seed=3)
    for request in requests:
        assert 8192 < request.prompt_tokens + request.output_tokens <= 12288
        assert request.prompt_tokens == approx_tokens(request.prompt)


def test_validate_and_the_compress_package_import_neither_sklearn_nor_rouge_score():
    import subprocess
    import sys

    from support import FLEET_INSTANCES

    code = ("import sys, contextlib, io\nfrom optfleet.cli import main\nimport optfleet.compress\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n    main(['validate', {str(FLEET_INSTANCES / 'toy.yaml')!r}])\n"
            "print(sorted(m for m in ('sklearn', 'rouge_score', 'nltk') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_missing_compress_extra_is_named_with_its_install_command(tmp_path, monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "rouge_score" else real(name, *a))
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("One sentence here. Another one there.")
    assert main(["compress", str(prompt), "--budget-tokens", "100"]) == 2
    assert "rouge-score: pip install 'optfleet[compress]'" in capsys.readouterr().err


def test_rouge_tokens_are_the_rouge_score_librarys():
    from rouge_score.tokenize import tokenize

    from optfleet.compress.fidelity import rouge_tokens

    rng = random.Random(11)
    alphabet = "aZ9 .,;-_\n\tÉéİıßﬁ中文Ωω0'\"K"  # cases, digits, punctuation, letters whose lower case is ASCII or longer
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        assert rouge_tokens(text) == tokenize(text, None), text


def test_an_extract_is_scored_exactly_in_one_scan_and_a_huge_one_says_so(monkeypatch):
    from optfleet.compress import fidelity as module

    extract = ". ".join(TEXT.split(". ")[::3])
    exact = module.lcs_length(module.rouge_tokens(TEXT), module.rouge_tokens(extract)) / len(module.rouge_tokens(TEXT))
    assert fidelity(TEXT, extract).rouge_l_recall == pytest.approx(exact) and fidelity(TEXT, extract).notes == ()
    monkeypatch.setattr(module, "MAX_LCS_PAIRS", 10)
    monkeypatch.setattr(module, "MAX_TFIDF_SENTENCES", 4)
    kept = fidelity(TEXT, extract)
    assert kept.rouge_l_recall == pytest.approx(exact)
    assert kept.notes[0].startswith("ROUGE-L recall exact in one scan of the original's 300 tokens: the compressed text's 100")
    assert kept.notes[1].startswith("TF-IDF cosine: idf fitted on a systematic sample of 4 of the original's 30 sentences (one in 8")
    scrambled = fidelity(TEXT, "slots per GPU Pool 0")
    assert scrambled.rouge_l_recall is None and "not computed" in scrambled.notes[0] and "above the limit of 10" in scrambled.notes[0]


def test_a_prompt_holding_nul_bytes_is_refused_as_the_document_reader_refuses_binary_data(tmp_path, capsys):
    path = tmp_path / "prompt.txt"
    path.write_bytes(TEXT.encode()[:200] + b"\x00\x01\x02" + TEXT.encode()[200:])
    assert main(["compress", str(path), "--budget-tokens", "200"]) == EXIT_BAD_INPUT
    assert capsys.readouterr().err == f"error: FILE = {str(path)!r}: is binary data, not text\n"
