"""A block-hash request trace: requests in arrival order, each a path of hashed KV blocks in a prefix tree.

A request ``r`` arrives at ``arrival_s[r]`` with ``input_tokens[r]`` prompt
tokens, cut into blocks of ``block_tokens``: its path ``b_1 .. b_n`` holds
``n = ceil(input_tokens / block_tokens)`` block ids (the last block may be
partial).  Equal ids mean equal prefixes (Mooncake FAST'25 and Qwen-Bailian
hash each block together with everything before it), so the blocks form a
forest: the parent of ``b_k`` is ``b_{k-1}`` (none for ``b_1``).  A block seen
under two different parents contradicts that reading and is refused.

Occurrences: the ``k``-th block of request ``r`` is occurrence ``o =
path_start[r] + k - 1`` of the flat arrays ``occ_block`` (block id, dense
0..B-1), ``occ_request`` and ``occ_tokens`` (``block_tokens``, or what is left
of the prompt in its last block).  ``occ_next[o]`` is the block's next
occurrence (-1 when it is never used again): the gap ``(r, next request)`` a
cache may keep it through.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.instance.shared_schema import MAX_TOKENS


@dataclass(frozen=True)
class BlockTrace:
    """Requests, their block paths and the block forest (module docstring); times in s, lengths in tokens."""

    block_tokens: int
    arrival_s: NDArray[np.float64]
    input_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    path_start: NDArray[np.int64]        # request r's occurrences are path_start[r] .. path_start[r + 1] - 1
    occ_block: NDArray[np.int64]
    occ_request: NDArray[np.int64]
    occ_depth: NDArray[np.int64]         # 1 for the first block of a path
    occ_tokens: NDArray[np.int64]
    occ_next: NDArray[np.int64]
    occ_prev: NDArray[np.int64]
    block_parent: NDArray[np.int64]      # -1 for a root block

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def n_blocks(self) -> int:
        return len(self.block_parent)

    def path(self, request: int) -> NDArray[np.int64]:
        return self.occ_block[self.path_start[request]:self.path_start[request + 1]]

    @property
    def reuse_occurrences(self) -> int:
        """Occurrences whose block is used again later: the gaps a cache may keep a block through."""
        return int(np.count_nonzero(self.occ_next >= 0))


def build_block_trace(arrival_s: list[float], input_tokens: list[int], output_tokens: list[int], paths: list[list[object]],
                      block_tokens: int, field: str = "trace", line_of: list[int] | None = None,
                      times_as_written: list[float] | None = None, time_field: str = "timestamp",
                      names: tuple[str, str, str] = ("input_length", "output_length", "hash_ids")) -> BlockTrace:
    """Validate the columns and build the trace; an error names ``field``, the column and the line (1-based).

    Checks: at least one request; ``block_tokens >= 1``; times finite, >= 0
    and non-decreasing; lengths whole and >= 0; each path has
    ``ceil(input_tokens / block_tokens)`` blocks (a block size that does not
    match the trace fails here); no block under two parents, nor twice in
    one path.  ``times_as_written`` (the file's values before conversion to seconds) and ``time_field`` are what
    a message about a time shows; ``names`` are the file's names of the input length, output length and hash list
    columns, which messages name.
    """
    input_field, output_field, hashes_field = names
    lines = line_of or list(range(1, len(arrival_s) + 1))
    written = times_as_written if times_as_written is not None else arrival_s
    if not isinstance(block_tokens, int) or isinstance(block_tokens, bool) or block_tokens < 1:
        raise InputError(f"{field}.block_tokens", block_tokens, "a block holds at least one token")
    if len(arrival_s) == 0:
        raise InputError(f"{field}.file", "", "the trace is empty: it has no requests")
    times = np.asarray(arrival_s, dtype=float)
    for i, t in enumerate(times):
        if not np.isfinite(t) or t < 0:
            raise InputError(f"{field}.{time_field}", written[i], f"line {lines[i]}: an arrival time must be a finite number >= 0")
        if i and t < times[i - 1]:
            raise InputError(f"{field}.{time_field}", written[i], f"line {lines[i]}: arrival times must not decrease "
                                                                  f"(the line before has {written[i - 1]})")
    for name, column in ((input_field, input_tokens), (output_field, output_tokens)):
        for i, v in enumerate(column):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise InputError(f"{field}.{name}", v, f"line {lines[i]}: a token count must be a whole number >= 0")
            if v > MAX_TOKENS:
                raise InputError(f"{field}.{name}", v, f"line {lines[i]}: above the limit of {MAX_TOKENS:,} tokens "
                                                       "(the largest count float64 holds exactly)")
    ids: dict[object, int] = {}
    parent: list[int] = []
    occ_block: list[int] = []
    starts = [0]
    for i, path in enumerate(paths):
        expected = -(-int(input_tokens[i]) // block_tokens)
        if len(path) != expected:
            raise InputError(f"{field}.{hashes_field}", len(path), f"line {lines[i]}: {len(path)} blocks, but {input_field} {input_tokens[i]} "
                                                             f"needs ceil({input_tokens[i]} / {block_tokens}) = {expected} blocks of "
                                                             f"{block_tokens} tokens: is the block size right?")
        above = -1
        seen: set[int] = set()
        for h in path:
            if isinstance(h, bool) or not isinstance(h, (int, str, np.integer)):
                raise InputError(f"{field}.{hashes_field}", h, f"line {lines[i]}: a block hash is an integer or a string")
            b = ids.setdefault(h, len(ids))
            if b == len(parent):
                parent.append(above)
            elif parent[b] != above or b in seen:
                raise InputError(f"{field}.{hashes_field}", h, f"line {lines[i]}: block {h!r} appears under two different parents "
                                                         "(the hash lists contradict each other: a block hash stands for its whole prefix)")
            seen.add(b)
            occ_block.append(b)
            above = b
        starts.append(len(occ_block))
    if not occ_block:
        raise InputError(f"{field}.file", "", f"the trace has no blocks: every request's {input_field} is 0")
    path_start = np.asarray(starts, dtype=np.int64)
    lengths = np.diff(path_start)
    occ_request = np.repeat(np.arange(len(paths)), lengths)
    occ_depth = np.arange(len(occ_block)) - np.repeat(path_start[:-1], lengths) + 1
    inputs = np.asarray(input_tokens, dtype=np.int64)
    occ_tokens = np.minimum(block_tokens, inputs[occ_request] - (occ_depth - 1) * block_tokens)
    blocks = np.asarray(occ_block, dtype=np.int64)
    occ_next = np.full(len(blocks), -1, dtype=np.int64)
    occ_prev = np.full(len(blocks), -1, dtype=np.int64)
    last: dict[int, int] = {}
    for o, b in enumerate(occ_block):
        p = last.get(b)
        if p is not None:
            occ_next[p], occ_prev[o] = o, p
        last[b] = o
    return BlockTrace(block_tokens, times, inputs, np.asarray(output_tokens, dtype=np.int64), path_start, blocks, occ_request,
                      occ_depth.astype(np.int64), occ_tokens.astype(np.int64), occ_next, occ_prev, np.asarray(parent, dtype=np.int64))
