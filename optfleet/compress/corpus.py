"""A corpus of real English prose for the compressor: borderline-length prompts cut from the Python documentation.

Source: the help topics of the Python documentation, shipped with every CPython in the standard library's
``pydoc_data/topics.py`` (the language reference's prose, with its grammar snippets and code examples;
Python Software Foundation License Version 2, https://docs.python.org/3/license.html).  Nothing is copied
into this repository: the text is read from the running interpreter's standard library.

A prompt is a run of consecutive sentences of the topics (sorted by name, joined by blank lines) from a
random start, grown until the request ``L_total = L_in + L_out`` reaches a target drawn uniformly from the
borderline band ``(B, gamma B]`` (FleetOpt, section 5.1; Appendix C uses ``B = 8,192``, ``gamma = 1.5``,
``L_in`` 8K-12K tokens) — the requests Compress-and-Route compresses.  Seeded: the same arguments give the
same prompts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optfleet.compress.text import TokenCounter, approx_tokens, split_sentences

SOURCE = "Python documentation help topics (pydoc_data/topics.py, CPython standard library), PSF License Version 2"


@dataclass(frozen=True)
class BorderlineRequest:
    """A prompt and its output budget, with ``B < tokens(prompt) + output_tokens <= gamma B``."""

    prompt: str
    output_tokens: int
    prompt_tokens: int


def documentation_text() -> str:
    """Every help topic of the running Python's documentation, sorted by name, separated by blank lines."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[name].strip() for name in sorted(topics))


def borderline_requests(count: int, *, budget_tokens: int = 8192, gamma: float = 1.5, output_tokens: int = 512,
                        seed: int = 0, counter: TokenCounter = approx_tokens) -> list[BorderlineRequest]:
    """``count`` requests whose ``L_total`` falls in ``(budget_tokens, gamma budget_tokens]`` (module docstring)."""
    text = documentation_text()
    sentences = split_sentences(text)
    tokens = np.array([counter(s.text) for s in sentences], dtype=np.int64)
    rng = np.random.default_rng(seed)
    low, high = budget_tokens - output_tokens, int(gamma * budget_tokens) - output_tokens
    requests = []
    while len(requests) < count:
        target = int(rng.integers(low + 1, high + 1))
        start = int(rng.integers(0, len(sentences)))
        end = start + int(np.searchsorted(np.cumsum(tokens[start:]), target, side="right"))
        if end >= len(sentences) or end <= start:
            continue  # ran off the end of the documentation: draw again
        prompt = text[sentences[start].start:sentences[end - 1].end]
        prompt_tokens = counter(prompt)
        if low < prompt_tokens <= high:
            requests.append(BorderlineRequest(prompt, output_tokens, prompt_tokens))
    return requests
