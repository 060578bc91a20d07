"""Conversation traces for prompt caching: turns, histories and gaps.

A trace is a list of turns ``(conversation, t, q, a)``: turn ``j`` of a
conversation arrives at ``t`` seconds with ``q`` new prompt tokens and
produces ``a`` answer tokens.  Its prompt-side context is the conversation's
history ``H_j = sum_{l<j} (q_l + a_l)`` plus ``q_j`` (Tail-Optimized Caching
for LLM Inference, section 2).  After a turn is served, up to ``H_{j+1} =
H_j + q_j + a_j`` tokens of the conversation may be kept in the cache until its
next turn; that interval is the turn's *gap*.

Rows are held in global event order: sorted by ``arrival_s``, ties broken by
conversation id and then turn index, so row ``r`` is event ``r`` of every
replay and of the hindsight model.  Conversations get dense ids
``0..n_conversations-1`` in order of first appearance; the file's ids are kept
in ``conversation_labels``.  Lengths are tokens; capacities are stated in
tokens (``block_tokens`` converts blocks to tokens where an instance gives
blocks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.errors import InputError


@dataclass(frozen=True)
class ConversationTrace:
    """Turns of many conversations in event order, with derived history and gap links.

    Fields (one entry per turn, row = event index):

    * ``conversation``: dense conversation id;
    * ``arrival_s``: arrival time, non-decreasing over rows;
    * ``prompt_tokens`` ``q`` and ``answer_tokens`` ``a``;
    * ``turn_index``: 0-based turn number within the conversation;
    * ``history_tokens``: ``H`` before this turn, the most the cache can hold for it;
    * ``next_turn``: row of the same conversation's next turn, ``-1`` for its last turn;
    * ``prev_turn``: row of its previous turn, ``-1`` for its first turn.
    """

    conversation: NDArray[np.int64]
    arrival_s: NDArray[np.float64]
    prompt_tokens: NDArray[np.int64]
    answer_tokens: NDArray[np.int64]
    turn_index: NDArray[np.int64]
    history_tokens: NDArray[np.int64]
    next_turn: NDArray[np.int64]
    prev_turn: NDArray[np.int64]
    conversation_labels: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def n_conversations(self) -> int:
        return len(self.conversation_labels)

    @property
    def context_tokens(self) -> NDArray[np.int64]:
        """Prompt-side tokens of each turn, ``H_j + q_j`` (all of it uncached on a miss)."""
        return self.history_tokens + self.prompt_tokens

    @property
    def history_after_tokens(self) -> NDArray[np.int64]:
        """History a turn leaves behind, ``H_{j+1} = H_j + q_j + a_j`` (what its gap may cache)."""
        return self.history_tokens + self.prompt_tokens + self.answer_tokens


def build_trace(
    conversation: ArrayLike,
    arrival_s: ArrayLike,
    prompt_tokens: ArrayLike,
    answer_tokens: ArrayLike,
    field: str = "trace",
) -> ConversationTrace:
    """Validate turn columns and derive event order, histories and gap links.

    ``conversation`` may hold any hashable labels.  Conversations may be
    interleaved in any order, but within one conversation the file lists its
    turns in order, so their times must not decrease (a later turn arriving
    earlier is an error).  Errors name ``field`` and the offending row.
    """
    labels_in = np.asarray(conversation)
    t = np.asarray(arrival_s, dtype=float)
    q = _token_column(prompt_tokens, f"{field}.q")
    a = _token_column(answer_tokens, f"{field}.a")
    n = len(t)
    if n == 0:
        raise InputError(field, 0, "the trace has no turns")
    if not (len(labels_in) == len(q) == len(a) == n):
        raise InputError(field, (len(labels_in), n, len(q), len(a)), "columns conversation_id, t, q, a differ in length")
    bad = np.flatnonzero(~np.isfinite(t) | (t < 0))
    if bad.size:
        raise InputError(f"{field}.t", float(t[bad[0]]), f"row {int(bad[0])}: arrival time must be finite and >= 0")

    labels, first_seen = _dense_ids(labels_in)
    in_file = np.lexsort((np.arange(n), first_seen))
    backwards = np.flatnonzero((first_seen[in_file][1:] == first_seen[in_file][:-1]) & (np.diff(t[in_file]) < 0))
    if backwards.size:
        row = int(in_file[backwards[0] + 1])
        raise InputError(f"{field}.t", float(t[row]), f"row {row}: conversation {labels_in[row]!s} goes back in time (its previous turn arrived at {float(t[in_file[backwards[0]]])})")
    order = np.lexsort((np.arange(n), first_seen, t))
    conv = first_seen[order]
    t, q, a = t[order], q[order], a[order]

    by_conv = np.lexsort((np.arange(n), conv))
    same = conv[by_conv][1:] == conv[by_conv][:-1]
    next_turn = np.full(n, -1, dtype=np.int64)
    prev_turn = np.full(n, -1, dtype=np.int64)
    next_turn[by_conv[:-1][same]] = by_conv[1:][same]
    prev_turn[by_conv[1:][same]] = by_conv[:-1][same]

    turn_index = np.zeros(n, dtype=np.int64)
    history = np.zeros(n, dtype=np.int64)
    step = q + a
    starts = np.r_[True, ~same]
    group = np.cumsum(starts) - 1
    group_start = np.flatnonzero(starts)
    position = np.arange(n) - group_start[group]
    cumulative = np.cumsum(step[by_conv]) - step[by_conv]
    turn_index[by_conv] = position
    history[by_conv] = cumulative - cumulative[group_start[group]]
    return ConversationTrace(
        conversation=conv.astype(np.int64),
        arrival_s=t,
        prompt_tokens=q,
        answer_tokens=a,
        turn_index=turn_index,
        history_tokens=history,
        next_turn=next_turn,
        prev_turn=prev_turn,
        conversation_labels=labels,
    )


def _token_column(values: ArrayLike, field: str) -> NDArray[np.int64]:
    raw = np.asarray(values, dtype=float)
    bad = np.flatnonzero(~np.isfinite(raw) | (raw < 0) | (raw != np.round(raw)))
    if bad.size:
        raise InputError(field, float(raw[bad[0]]), f"row {int(bad[0])}: token counts must be integers >= 0")
    return raw.astype(np.int64)


def _dense_ids(labels: NDArray) -> tuple[tuple[str, ...], NDArray[np.int64]]:
    """Map labels to ids 0.. in order of first appearance in the file."""
    uniques, first_index, inverse = np.unique(labels.astype(str), return_index=True, return_inverse=True)
    rank = np.empty(len(uniques), dtype=np.int64)
    rank[np.argsort(first_index, kind="stable")] = np.arange(len(uniques))
    ordered = uniques[np.argsort(first_index, kind="stable")]
    return tuple(str(x) for x in ordered), rank[inverse.ravel()]
