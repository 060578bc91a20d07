"""Text primitives of the compressor: Unicode-aware sentence splitting, the default token count and the terms scored.

Sentences (Chen et al., FleetOpt, section 5.2 step 1: "Unicode-aware heuristics"): a sentence ends

* at ``. ! ? …`` and the Arabic, Devanagari, Ethiopic and Armenian full stops ``؟ । ॥ ። ։`` (with any
  closing quotes or brackets after them) when whitespace or the end of the text follows, unless the next
  word starts in lower case (``e.g. this``, ``3 p.m. today``) or the mark closes a single capital
  (an initial, ``J. Smith``);
* right after the CJK full stops ``。 ！ ？`` (no space is written after them);
* at a blank line (a paragraph, heading or list break).

A decimal point (``3.14``) is never a boundary: no whitespace follows it.

Tokens (the default counter, :func:`approx_tokens`): ``ceil(1.3 w + 1.5 h)`` for ``w`` whitespace-separated
words that hold some non-CJK character and ``h`` CJK characters (Han, kana, Hangul) — the public
semantic-router's estimate (1.3 BPE tokens per word, Sennrich et al. 2016; 1.5 per ideograph), rounded up.
Rounding up makes the count sub-additive over sentences, ``tokens(s_1 + " " + s_2) <= tokens(s_1) +
tokens(s_2)``: joining never merges two words, and a sum of ceilings is at least the ceiling of the sum.
Any callable ``str -> int`` (a real tokenizer) can replace it.

Terms (what TF-IDF, TextRank and novelty compare, :func:`terms`): lower-cased runs of letters and digits;
CJK runs, which have no spaces, as single characters plus the bigrams of adjacent characters (character
n-grams, McNamee and Mayfield, SIGIR 2004).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

TokenCounter = Callable[[str], int]


_CJK_RANGES = ((0x1100, 0x11FF), (0x3040, 0x30FF), (0x3130, 0x318F), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF),
               (0xF900, 0xFAFF), (0x20000, 0x2FFFF))  # Hangul Jamo, kana, Hangul compatibility, Han, Hangul, Han compatibility
_CJK = "".join(f"{chr(first)}-{chr(last)}" for first, last in _CJK_RANGES)
_CJK_EDGES = np.array([edge for first, last in _CJK_RANGES for edge in (first, last + 1)], dtype=np.uint32)
# What str.split() splits at (Unicode White_Space; tested against str.isspace), as a table over the code points up to the last.
_WHITESPACE = "\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
_SPACE_TABLE = np.zeros(ord(_WHITESPACE[-1]) + 2, dtype=bool)
_SPACE_TABLE[[ord(character) for character in _WHITESPACE]] = True
_LONG_TEXT = 2000  # characters: from about here numpy's test of the code points beats the regex scan (9 ns a character)
_CJK_CHARACTER = re.compile(f"[{_CJK}]")
_NON_CJK = re.compile(f"[^{_CJK}\\s]")
_TERM_RUN = re.compile(r"[^\W_]+")
_CJK_RUN = re.compile(f"([{_CJK}]+)")
_CLOSERS = "\"'”’)\\]»」』"
_MARKS = ".!?…؟।॥።։"
_CJK_STOPS = "。！？"
# One pass over the text.  Every boundary starts with one of the characters of the leading class, so the regex engine
# scans for that class (fast) instead of trying each alternative at every position; the lookbehinds then tell
# which alternative that first character began.  The empty named groups label the alternative (``lastgroup``).
_BOUNDARY = re.compile(
    f"[{_MARKS}{_CJK_STOPS}\n]"
    f"(?:(?<=[{_MARKS}])[{_MARKS}]*[{_CLOSERS}]*(?=\\s+(?P<next>\\S)|\\s*$)(?P<mark>)"  # Latin and other spaced scripts
    f"|(?<=[{_CJK_STOPS}])[{_CJK_STOPS}]*[{_CLOSERS}]*(?P<cjk>)"  # CJK full stops
    r"|(?<=\n)[ \t]*\n\s*(?P<blank>))"  # a blank line
)
# Terms of an ASCII text in one C pass (then split at spaces): letters and digits lower-cased, everything else a space.
_ASCII_TERMS = str.maketrans({chr(c): (chr(c).lower() if chr(c).isalnum() else " ") for c in range(128)})


class Sentence(NamedTuple):
    """One sentence: its text (stripped) and where it starts and ends in the original text."""

    text: str
    start: int
    end: int


def split_sentences(text: str) -> list[Sentence]:
    """The sentences of ``text`` in order (module docstring); an empty list for blank text."""
    sentences: list[Sentence] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        kind = match.lastgroup
        if kind == "mark" and not _ends_sentence(text, match):
            continue
        stop, end = match.span() if kind == "blank" else (match.end(), match.end())
        _append(sentences, text, start, stop)
        start = end
    _append(sentences, text, start, len(text))
    return sentences


def _ends_sentence(text: str, match: re.Match[str]) -> bool:
    """Whether a spaced-script mark ends its sentence: not before a lower-case word, not after an initial."""
    following = match["next"]
    if following is not None and following.islower():
        return False
    dot = match.start()
    initial = match.end() == dot + 1 and text[dot] == "." and text[dot - 1].isupper() and (dot < 2 or not text[dot - 2].isalnum())
    return not initial


def _append(sentences: list[Sentence], text: str, start: int, end: int) -> None:
    piece = text[start:end]
    stripped = piece.strip()
    if stripped:
        lead = start + len(piece) - len(piece.lstrip())
        sentences.append(Sentence(stripped, lead, lead + len(stripped)))


def approx_tokens(text: str) -> int:
    """``ceil(1.3 w + 1.5 h)``: ``w`` words holding a non-CJK character, ``h`` CJK characters (module docstring)."""
    if not has_cjk(text):  # every word holds a non-CJK character
        words, cjk = _word_count(text), 0
    else:
        words = sum(1 for word in text.split() if _NON_CJK.search(word))
        cjk = len(_CJK_CHARACTER.findall(text))
    return -(-(13 * words + 15 * cjk) // 10)  # ceil(1.3 w + 1.5 h) in integers: no float round-off


def _word_count(text: str) -> int:
    """``len(text.split())``.  A long text's from its code points: a word begins at each non-space character that
    follows a space, or starts the text (no word strings are made)."""
    if len(text) < _LONG_TEXT:
        return len(text.split())
    space = _SPACE_TABLE[np.minimum(_code_points(text), len(_SPACE_TABLE) - 1)]
    return int(np.count_nonzero(space[:-1] & ~space[1:])) + int(not space[0])


def _code_points(text: str) -> NDArray[np.uint32]:
    """The code points of ``text``, one ``uint32`` a character (its UTF-32 encoding)."""
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a CJK character.  Never an ASCII text (that test is free); a long text by its code
    points: a code point lies in one of the ranges when an odd number of range edges ``first, last + 1`` are at
    or below it."""
    if text.isascii():
        return False
    if len(text) < _LONG_TEXT:
        return _CJK_CHARACTER.search(text) is not None
    codes = _code_points(text)
    high = codes[codes >= _CJK_EDGES[0]]
    return bool((np.searchsorted(_CJK_EDGES, high, side="right") % 2).any())


def terms_of(sentences: list[str]) -> list[list[str]]:
    """:func:`terms` of each sentence.  The ASCII sentences are translated together, in one call: a translation
    builds its table anew each call, which costs more than translating one sentence (translation keeps the
    length, so each sentence's part of the result is found by its length)."""
    translated = "".join([sentence for sentence in sentences if sentence.isascii()]).translate(_ASCII_TERMS)
    found: list[list[str]] = []
    at = 0
    for sentence in sentences:
        if sentence.isascii():
            found.append(translated[at:at + len(sentence)].split())
            at += len(sentence)
        else:
            found.append(terms(sentence))
    return found


def terms(text: str) -> list[str]:
    """The scored terms of ``text``: lower-cased letter/digit runs; CJK characters and their adjacent bigrams."""
    runs = _TERM_RUN.findall(text.lower())
    if not has_cjk(text):
        return runs
    found: list[str] = []
    for run in runs:
        for i, piece in enumerate(_CJK_RUN.split(run)):
            if not piece:
                continue
            if i % 2 == 0:
                found.append(piece)
            else:
                found.extend(piece)
                found.extend(piece[j:j + 2] for j in range(len(piece) - 1))
    return found
