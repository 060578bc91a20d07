"""Every compiled function of the placement simulator, in one file on purpose: numba's on-disk cache (``cache=True``)
is invalidated by a change to the function's own file only, so a callee kept in another file could leave a stale
compiled caller behind.  The sections follow the Python reference: the arrays' columns, the block cache
(cache.BlockCache), the server (server.Server), the oracle (forecast.forecast) and the choice
(policies.affinity_candidates, policies.pick_by_latency), and the runs (policies.route, evaluate.replay)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

# request columns: integers (Q) and times in ms (QF); ROLE is the request's part in its server's iteration in flight
PROMPT, OUTPUT, GROUP, SESSION, SHARED, TOTAL, HIT, COMPUTED, DECODED, SHARED_UPTO, CHUNK, ROLE, WAIT_NEXT, FINISHED_AT = range(14)
ARRIVAL, FIRST, DONE = range(3)
NO_ROLE, DECODING, PREFILLING, COMPLETED = range(4)
# server columns: integers (SI) and floats (SF)
SEATS, CAPACITY, BUDGET, N_RUN, Q_HEAD, Q_TAIL, Q_LEN, BUSY, REPEATS, IN_FLIGHT, HELD, CACHED, LRU_OLD, LRU_NEW = range(14)
PER_TOKEN, BASE, PER_SEQ, PER_BLOCK, END, START, STEP, PER_PAIR = range(8)
# cache pools: origins (O), holder nodes (H: an origin's distinct holder ends and their counts), cached segments (G)
O_START, O_END, O_TOP, O_HOLDERS, O_SEG_OLD, O_SEG_NEW, O_KEY, O_NEXT_FREE = range(8)
H_END, H_COUNT, H_NEXT = range(3)
G_LO, G_HI, G_ORIGIN, G_OLDER, G_NEWER, G_LRU_OLDER, G_LRU_NEWER, G_NEXT_FREE = range(8)
FREE_ORIGIN, FREE_HOLDER, FREE_SEGMENT, FINISH_COUNT = range(4)
# forecast rows (F): a running request's copy
F_PROMPT, F_OUTPUT, F_COMPUTED, F_DECODED, F_ADDED, F_CHUNK, F_ROLE = range(7)
NOT_FOUND = np.int64(-1)  # a missing origin (typed so a lookup's result is never optional)

# ---------------------------------------------------------------------------------------------------- block cache


@njit(cache=True)
def _pop_free(pool, free, which, next_column):
    slot = free[which]
    if slot < 0:
        raise RuntimeError("a compiled cache pool is exhausted (its size bound is wrong)")
    free[which] = pool[slot, next_column]
    return slot


@njit(cache=True)
def _push_free(pool, free, which, next_column, slot):
    pool[slot, next_column] = free[which]
    free[which] = slot


@njit(cache=True)
def _find(origins, key):
    """The slot of origin ``key``, -1 when absent."""
    if key in origins:
        return origins[key]
    return NOT_FOUND


@njit(cache=True)
def _end_of(origins, O, key, default):
    o = _find(origins, key)
    if o < 0 or O[o, O_END] == O[o, O_START]:
        return default
    return O[o, O_END]


@njit(cache=True)
def _keys(Q, r, k, block, stride):
    """The group's and the session's origin keys on server ``k`` and the blocks of the shared system prompt."""
    n_shared = Q[r, SHARED] // block if Q[r, GROUP] >= 0 else 0
    return k * stride + 2 * Q[r, GROUP], k * stride + 2 * Q[r, SESSION] + 1, n_shared


@njit(cache=True)
def hit_blocks(origins, O, Q, r, k, block, stride):
    """cache.BlockCache.hit_blocks."""
    g, s, n_shared = _keys(Q, r, k, block, stride)
    g_end = _end_of(origins, O, g, 0) if n_shared else 0
    hit = g_end if g_end < n_shared else _end_of(origins, O, s, n_shared)
    return min(hit, (Q[r, PROMPT] - 1) // block)


@njit(cache=True)
def admission_blocks(origins, O, Q, r, k, hit, block, stride):
    """cache.BlockCache.admission_blocks."""
    g, s, n_shared = _keys(Q, r, k, block, stride)
    idle = 0
    if 0 < min(hit, n_shared):
        o = _find(origins, g)
        top = O[o, O_TOP] if o >= 0 else 0
        idle += max(0, min(hit, n_shared) - max(0, top))
    if hit > max(0, n_shared):
        o = _find(origins, s)
        top = O[o, O_TOP] if o >= 0 else n_shared
        idle += max(0, hit - max(n_shared, top))
    return Q[r, TOTAL] - hit + idle


@njit(cache=True)
def _origin(origins, O, free, key, start):
    o = _find(origins, key)
    if o < 0:
        o = _pop_free(O, free, FREE_ORIGIN, O_NEXT_FREE)
        O[o, O_START] = O[o, O_END] = O[o, O_TOP] = start
        O[o, O_HOLDERS] = O[o, O_SEG_OLD] = O[o, O_SEG_NEW] = -1
        O[o, O_KEY] = key
        origins[key] = o
    return o


@njit(cache=True)
def _add_holder(O, H, free, o, end):
    node = O[o, O_HOLDERS]
    while node >= 0:
        if H[node, H_END] == end:
            H[node, H_COUNT] += 1
            return
        node = H[node, H_NEXT]
    node = _pop_free(H, free, FREE_HOLDER, H_NEXT)
    H[node, H_END], H[node, H_COUNT], H[node, H_NEXT] = end, 1, O[o, O_HOLDERS]
    O[o, O_HOLDERS] = node


@njit(cache=True)
def _drop_holder(O, H, free, o, end):
    previous, node = -1, O[o, O_HOLDERS]
    while node >= 0 and H[node, H_END] != end:
        previous, node = node, H[node, H_NEXT]
    if node < 0:  # the Python cache's KeyError: requests that disagree on their origins (a session in two groups)
        raise RuntimeError("a released block range has no holder: the requests' groups and sessions disagree")
    H[node, H_COUNT] -= 1
    if H[node, H_COUNT] == 0:
        if previous < 0:
            O[o, O_HOLDERS] = H[node, H_NEXT]
        else:
            H[previous, H_NEXT] = H[node, H_NEXT]
        _push_free(H, free, FREE_HOLDER, H_NEXT, node)


@njit(cache=True)
def _top_holder(O, H, o):
    top, node = O[o, O_START], O[o, O_HOLDERS]
    if node >= 0:
        top = H[node, H_END]
    while node >= 0:
        top = max(top, H[node, H_END])
        node = H[node, H_NEXT]
    return top


@njit(cache=True)
def _unlink(G, seg, older, newer, ends, row, oldest, newest):
    """Take segment ``seg`` out of a doubly linked list over ``G`` (links in columns ``older``, ``newer``) whose ends
    are ``ends[row, oldest]`` and ``ends[row, newest]``."""
    before, after = G[seg, older], G[seg, newer]
    if before >= 0:
        G[before, newer] = after
    else:
        ends[row, oldest] = after
    if after >= 0:
        G[after, older] = before
    else:
        ends[row, newest] = before


@njit(cache=True)
def _append(G, seg, older, newer, ends, row, oldest, newest):
    """Put segment ``seg`` at the newest end of the list :func:`_unlink` describes."""
    G[seg, older], G[seg, newer] = ends[row, newest], -1
    if ends[row, newest] >= 0:
        G[ends[row, newest], newer] = seg
    else:
        ends[row, oldest] = seg
    ends[row, newest] = seg


@njit(cache=True)
def _unlink_segment(SI, O, G, free, k, seg):
    """Take segment ``seg`` out of its origin's list and server ``k``'s LRU, and free it."""
    _unlink(G, seg, G_OLDER, G_NEWER, O, G[seg, G_ORIGIN], O_SEG_OLD, O_SEG_NEW)
    _unlink(G, seg, G_LRU_OLDER, G_LRU_NEWER, SI, k, LRU_OLD, LRU_NEW)
    _push_free(G, free, FREE_SEGMENT, G_NEXT_FREE, seg)


@njit(cache=True)
def _hold(SI, O, H, G, free, k, o, lo, hi):
    """cache.BlockCache._hold."""
    if lo > O[o, O_START]:
        _drop_holder(O, H, free, o, lo)
    _add_holder(O, H, free, o, hi)
    take = max(0, min(hi, O[o, O_END]) - O[o, O_TOP])
    O[o, O_TOP] = max(O[o, O_TOP], hi)
    SI[k, HELD] += take
    SI[k, CACHED] -= take
    while take:
        seg = O[o, O_SEG_NEW]
        step = min(take, G[seg, G_HI] - G[seg, G_LO])
        G[seg, G_LO] += step
        take -= step
        if G[seg, G_LO] == G[seg, G_HI]:
            _unlink_segment(SI, O, G, free, k, seg)


@njit(cache=True)
def _evict(origins, SI, O, G, free, k):
    """cache.BlockCache._evict (an emptied segment leaves the LRU at once, where the reference skips it later)."""
    excess = SI[k, HELD] + SI[k, CACHED] - SI[k, CAPACITY]
    while excess > 0:
        seg = SI[k, LRU_OLD]
        o = G[seg, G_ORIGIN]
        step = min(excess, G[seg, G_HI] - G[seg, G_LO])
        G[seg, G_HI] -= step
        O[o, O_END] = G[seg, G_HI]
        SI[k, CACHED] -= step
        excess -= step
        if G[seg, G_LO] == G[seg, G_HI]:
            _unlink_segment(SI, O, G, free, k, seg)
            if O[o, O_END] == O[o, O_START]:  # nothing left of it (so nothing held): forget it
                del origins[O[o, O_KEY]]
                _push_free(O, free, FREE_ORIGIN, O_NEXT_FREE, o)


@njit(cache=True)
def admit(origins, Q, SI, O, H, G, free, r, k, hit, block, stride):
    """cache.BlockCache.admit."""
    g, s, n_shared = _keys(Q, r, k, block, stride)
    if 0 < min(hit, n_shared):
        _hold(SI, O, H, G, free, k, _origin(origins, O, free, g, 0), 0, min(hit, n_shared))
    if hit > max(0, n_shared):
        _hold(SI, O, H, G, free, k, _origin(origins, O, free, s, n_shared), n_shared, hit)
    SI[k, HELD] += Q[r, TOTAL] - hit
    _evict(origins, SI, O, G, free, k)


@njit(cache=True)
def _publish_span(origins, SI, O, H, G, free, k, key, start, lo, hi):
    o = _origin(origins, O, free, key, start)
    reused = min(hi, O[o, O_END]) - lo
    _hold(SI, O, H, G, free, k, o, lo, hi)
    SI[k, HELD] -= max(0, reused)
    O[o, O_END] = max(O[o, O_END], hi)


@njit(cache=True)
def publish(origins, Q, SI, O, H, G, free, r, k, first, last, block, stride):
    """cache.BlockCache.publish: blocks ``[first, last)`` of ``r`` become shared."""
    g, s, n_shared = _keys(Q, r, k, block, stride)
    if first < min(last, n_shared):
        _publish_span(origins, SI, O, H, G, free, k, g, 0, first, min(last, n_shared))
    if last > max(first, n_shared):
        _publish_span(origins, SI, O, H, G, free, k, s, n_shared, max(first, n_shared), last)


@njit(cache=True)
def _release_span(origins, SI, O, H, G, free, k, key, hi):
    o = origins[key]
    _drop_holder(O, H, free, o, hi)
    top = _top_holder(O, H, o)
    if top < O[o, O_TOP]:
        seg = _pop_free(G, free, FREE_SEGMENT, G_NEXT_FREE)
        G[seg, G_LO], G[seg, G_HI], G[seg, G_ORIGIN] = top, O[o, O_TOP], o
        _append(G, seg, G_OLDER, G_NEWER, O, o, O_SEG_OLD, O_SEG_NEW)
        _append(G, seg, G_LRU_OLDER, G_LRU_NEWER, SI, k, LRU_OLD, LRU_NEW)
        freed = O[o, O_TOP] - top
        SI[k, HELD] -= freed
        SI[k, CACHED] += freed
        O[o, O_TOP] = top


@njit(cache=True)
def release(origins, Q, SI, O, H, G, free, r, k, block, stride):
    """cache.BlockCache.release: the session's shared blocks, then the group's, then the private ones."""
    g, s, n_shared = _keys(Q, r, k, block, stride)
    upto = Q[r, SHARED_UPTO]
    if upto > max(0, n_shared):
        _release_span(origins, SI, O, H, G, free, k, s, upto)
    if 0 < min(upto, n_shared):
        _release_span(origins, SI, O, H, G, free, k, g, min(upto, n_shared))
    SI[k, HELD] -= Q[r, TOTAL] - upto

# ---------------------------------------------------------------------------------------------------- server


@njit(cache=True)
def iteration_ms(SF, k, n_decode, held, prefill_tokens, prefill_pairs):
    """server.Engine.iteration_ms, summed left to right."""
    return (SF[k, BASE] + SF[k, PER_SEQ] * n_decode + SF[k, PER_BLOCK] * held + SF[k, PER_TOKEN] * prefill_tokens
            + SF[k, PER_PAIR] * prefill_pairs)


@njit(cache=True)
def chunk_pairs(chunk, offset):
    """server.chunk_pairs."""
    return chunk * offset + chunk * (chunk + 1) // 2


@njit(cache=True)
def _plan(origins, Q, SI, SF, RUN, O, H, G, free, k, t, block, stride):
    """server.Server._plan: the next iteration at ``t``."""
    n_run, n_decode, n_prefill, tokens, pairs = SI[k, N_RUN], 0, 0, 0, 0
    for j in range(n_run):
        r = RUN[k, j]
        Q[r, ROLE] = DECODING if Q[r, COMPUTED] == Q[r, PROMPT] else NO_ROLE
        n_decode += Q[r, ROLE] == DECODING
    budget = max(0, SI[k, BUDGET] - n_decode)
    for j in range(n_run):
        r = RUN[k, j]
        if Q[r, COMPUTED] < Q[r, PROMPT] and budget > 0:
            Q[r, CHUNK] = min(Q[r, PROMPT] - Q[r, COMPUTED], budget)
            budget -= Q[r, CHUNK]
            tokens += Q[r, CHUNK]
            pairs += chunk_pairs(Q[r, CHUNK], Q[r, COMPUTED])
            Q[r, ROLE] = PREFILLING
            n_prefill += 1
    while budget > 0 and SI[k, Q_LEN] > 0 and n_run < SI[k, SEATS]:
        r = SI[k, Q_HEAD]
        hit = hit_blocks(origins, O, Q, r, k, block, stride)
        if SI[k, HELD] + admission_blocks(origins, O, Q, r, k, hit, block, stride) > SI[k, CAPACITY]:
            break
        admit(origins, Q, SI, O, H, G, free, r, k, hit, block, stride)
        Q[r, HIT] = Q[r, SHARED_UPTO] = hit
        Q[r, COMPUTED] = hit * block
        Q[r, CHUNK] = min(Q[r, PROMPT] - Q[r, COMPUTED], budget)
        budget -= Q[r, CHUNK]
        tokens += Q[r, CHUNK]
        pairs += chunk_pairs(Q[r, CHUNK], Q[r, COMPUTED])
        Q[r, ROLE] = PREFILLING
        n_prefill += 1
        RUN[k, n_run] = r
        n_run += 1
        SI[k, Q_HEAD] = Q[r, WAIT_NEXT]
        SI[k, Q_LEN] -= 1
    SI[k, N_RUN] = n_run
    if n_decode == 0 and n_prefill == 0:
        SI[k, BUSY] = 0
        return
    step = iteration_ms(SF, k, n_decode, SI[k, HELD], tokens, pairs)
    repeats = 1
    if n_prefill == 0:  # decode-only: repeats identically until the first completion
        repeats = -1
        for j in range(n_run):
            r = RUN[k, j]
            if repeats < 0 or Q[r, OUTPUT] - Q[r, DECODED] < repeats:
                repeats = Q[r, OUTPUT] - Q[r, DECODED]
    SF[k, START], SF[k, STEP], SI[k, REPEATS] = t, step, repeats
    SF[k, END] = t + repeats * step
    SI[k, BUSY] = 1


@njit(cache=True)
def _finish_iteration(origins, Q, QF, SI, RUN, O, H, G, free, k, end, block, stride):
    """server.Server._finish_iteration: the iteration in flight ends at ``end``."""
    n_run, repeats, completed = SI[k, N_RUN], SI[k, REPEATS], 0
    for j in range(n_run):
        r = RUN[k, j]
        if Q[r, ROLE] == DECODING:
            Q[r, DECODED] += repeats
            if Q[r, DECODED] >= Q[r, OUTPUT]:
                Q[r, ROLE] = COMPLETED
                completed += 1
    for j in range(n_run):
        r = RUN[k, j]
        if Q[r, ROLE] == PREFILLING:
            Q[r, COMPUTED] += Q[r, CHUNK]
            Q[r, CHUNK] = 0
            if Q[r, COMPUTED] == Q[r, PROMPT]:
                QF[r, FIRST] = end
                Q[r, DECODED] = 1
                full = Q[r, PROMPT] // block
                if full > Q[r, SHARED_UPTO]:
                    publish(origins, Q, SI, O, H, G, free, r, k, Q[r, SHARED_UPTO], full, block, stride)
                    Q[r, SHARED_UPTO] = full
                if Q[r, OUTPUT] == 1:
                    Q[r, ROLE] = COMPLETED
                    completed += 1
    if completed:
        for phase in range(2):  # the reference's order: the decoders completed, then the prefills completed
            for j in range(n_run):
                r = RUN[k, j]
                if Q[r, ROLE] != COMPLETED or (Q[r, OUTPUT] > 1) == (phase == 1):  # OUTPUT 1: completed at its prefill
                    continue
                _complete(origins, Q, QF, SI, O, H, G, free, r, k, end, block, stride)
        kept = 0
        for j in range(n_run):
            r = RUN[k, j]
            if Q[r, ROLE] != COMPLETED:
                RUN[k, kept] = r
                kept += 1
        SI[k, N_RUN] = kept
    SI[k, BUSY] = 0


@njit(cache=True)
def _complete(origins, Q, QF, SI, O, H, G, free, r, k, end, block, stride):
    QF[r, DONE] = end
    full = (Q[r, PROMPT] + Q[r, OUTPUT]) // block
    if full > Q[r, SHARED_UPTO]:
        publish(origins, Q, SI, O, H, G, free, r, k, Q[r, SHARED_UPTO], full, block, stride)
        Q[r, SHARED_UPTO] = full
    release(origins, Q, SI, O, H, G, free, r, k, block, stride)
    SI[k, IN_FLIGHT] -= Q[r, PROMPT]
    Q[r, FINISHED_AT] = free[FINISH_COUNT]
    free[FINISH_COUNT] += 1
    Q[r, ROLE] = COMPLETED


@njit(cache=True)
def advance(origins, Q, QF, SI, SF, RUN, O, H, G, free, k, t, block, stride):
    """server.Server.advance: every iteration of server ``k`` that ends before ``t``."""
    while SI[k, BUSY] and SF[k, END] < t:
        end = SF[k, END]
        _finish_iteration(origins, Q, QF, SI, RUN, O, H, G, free, k, end, block, stride)
        _plan(origins, Q, SI, SF, RUN, O, H, G, free, k, end, block, stride)


@njit(cache=True)
def enqueue(Q, SI, SF, RUN, k, r, t):
    """server.Server.enqueue: request ``r`` arrives at ``t`` on server ``k`` (advanced to ``t``)."""
    Q[r, WAIT_NEXT] = -1
    if SI[k, Q_LEN]:
        Q[SI[k, Q_TAIL], WAIT_NEXT] = r
    else:
        SI[k, Q_HEAD] = r
    SI[k, Q_TAIL] = r
    SI[k, Q_LEN] += 1
    SI[k, IN_FLIGHT] += Q[r, PROMPT]
    if not SI[k, BUSY]:
        for j in range(SI[k, N_RUN]):
            Q[RUN[k, j], ROLE] = NO_ROLE
        SI[k, REPEATS] = 1
        SF[k, END] = t
        SI[k, BUSY] = 1
    elif SI[k, REPEATS] > 1:  # cut the decode-only stretch at the end of the iteration in flight
        done = max(1, int(math.ceil((t - SF[k, START]) / SF[k, STEP])))
        if done < SI[k, REPEATS]:
            SI[k, REPEATS] = done
            SF[k, END] = SF[k, START] + done * SF[k, STEP]

# ---------------------------------------------------------------------------------------------------- oracle and choice


@njit(cache=True)
def _decode_tail(SF, F, n_run, mine, held, end, k, remaining, blocks):
    """forecast._decode_tail: ``mine``'s completion when every row decodes and nothing else will run."""
    for j in range(n_run):
        remaining[j], blocks[j] = F[j, F_OUTPUT] - F[j, F_DECODED], F[j, F_ADDED]
    for j in range(1, n_run):  # ascending by remaining tokens (the order among ties changes no sum: integers)
        m, b, i = remaining[j], blocks[j], j - 1
        while i >= 0 and remaining[i] > m:
            remaining[i + 1], blocks[i + 1] = remaining[i], blocks[i]
            i -= 1
        remaining[i + 1], blocks[i + 1] = m, b
    goal = F[mine, F_OUTPUT] - F[mine, F_DECODED]
    n, done, j = n_run, 0, 0
    while True:
        m = remaining[j]
        end = end + (m - done) * iteration_ms(SF, k, n, held, 0, 0)
        if m >= goal:
            return end
        while remaining[j] == m:
            held -= blocks[j]
            n -= 1
            j += 1
        done = m


@njit(cache=True)
def forecast(origins, Q, SI, SF, RUN, O, F, remaining, blocks, k, mine_request, hit, t, block, stride):
    """forecast.forecast on server ``k``'s state now: (TTFT, TPOT) in ms of request ``mine_request``, reusing
    ``hit`` blocks there, enqueued at ``t`` with no later arrival (the frozen cache's rules for held blocks)."""
    prompt, output = Q[mine_request, PROMPT], Q[mine_request, OUTPUT]
    mine_added, mine_reused = Q[mine_request, TOTAL] - hit, hit * block
    n_run, busy = SI[k, N_RUN], SI[k, BUSY]
    for j in range(n_run):
        r = RUN[k, j]
        F[j, F_PROMPT], F[j, F_OUTPUT], F[j, F_COMPUTED], F[j, F_DECODED] = Q[r, PROMPT], Q[r, OUTPUT], Q[r, COMPUTED], Q[r, DECODED]
        F[j, F_ADDED], F[j, F_CHUNK], F[j, F_ROLE] = Q[r, TOTAL] - Q[r, HIT], Q[r, CHUNK], Q[r, ROLE] if busy else NO_ROLE
    repeats, end = 1, t  # idle: wakes at t
    if busy:
        repeats, end = SI[k, REPEATS], SF[k, END]
        if repeats > 1:  # the arrival cuts the decode-only stretch
            cut = max(1, int(math.ceil((t - SF[k, START]) / SF[k, STEP])))
            if cut < repeats:
                repeats, end = cut, SF[k, START] + cut * SF[k, STEP]
    waiting, node = SI[k, Q_LEN] + 1, SI[k, Q_HEAD]  # the queue, then the forecast request
    held, mine, first = SI[k, HELD], -1, np.nan
    while True:
        finished = False  # the iteration ending at `end`
        for j in range(n_run):
            if F[j, F_ROLE] == DECODING:
                F[j, F_DECODED] += repeats
                finished = finished or F[j, F_DECODED] >= F[j, F_OUTPUT]
        for j in range(n_run):
            if F[j, F_ROLE] == PREFILLING:
                F[j, F_COMPUTED] += F[j, F_CHUNK]
                F[j, F_CHUNK] = 0
                if F[j, F_COMPUTED] == F[j, F_PROMPT]:
                    F[j, F_DECODED] = 1
                    finished = finished or F[j, F_OUTPUT] == 1
        if mine >= 0 and math.isnan(first) and F[mine, F_COMPUTED] == F[mine, F_PROMPT]:
            first = end
        if finished:
            if mine >= 0 and F[mine, F_DECODED] >= F[mine, F_OUTPUT]:
                return first - t, ((end - first) / (output - 1) if output > 1 else 0.0)
            kept = 0
            for j in range(n_run):
                if F[j, F_DECODED] >= F[j, F_OUTPUT]:
                    held -= F[j, F_ADDED]
                    continue
                if kept < j:
                    F[kept] = F[j]
                if j == mine:
                    mine = kept
                kept += 1
            n_run = kept
            if n_run == 0:
                held = 0
        n_decode, n_prefill, tokens, pairs = 0, 0, 0, 0  # plan the next iteration at `end`
        for j in range(n_run):
            F[j, F_ROLE] = DECODING if F[j, F_COMPUTED] == F[j, F_PROMPT] else NO_ROLE
            n_decode += F[j, F_ROLE] == DECODING
        budget = max(0, SI[k, BUDGET] - n_decode)
        for j in range(n_run):
            if F[j, F_COMPUTED] < F[j, F_PROMPT] and budget > 0:
                F[j, F_CHUNK] = min(F[j, F_PROMPT] - F[j, F_COMPUTED], budget)
                budget -= F[j, F_CHUNK]
                tokens += F[j, F_CHUNK]
                pairs += chunk_pairs(F[j, F_CHUNK], F[j, F_COMPUTED])
                F[j, F_ROLE] = PREFILLING
                n_prefill += 1
        while budget > 0 and waiting > 0 and n_run < SI[k, SEATS]:
            if waiting > 1:
                w_hit = hit_blocks(origins, O, Q, node, k, block, stride)
                w_prompt, w_output, w_added, w_reused = Q[node, PROMPT], Q[node, OUTPUT], Q[node, TOTAL] - w_hit, w_hit * block
            else:
                w_prompt, w_output, w_added, w_reused = prompt, output, mine_added, mine_reused
            if held + w_added > SI[k, CAPACITY]:
                break
            held += w_added
            chunk = min(w_prompt - w_reused, budget)
            F[n_run, F_PROMPT], F[n_run, F_OUTPUT], F[n_run, F_COMPUTED], F[n_run, F_DECODED] = w_prompt, w_output, w_reused, 0
            F[n_run, F_ADDED], F[n_run, F_CHUNK], F[n_run, F_ROLE] = w_added, chunk, PREFILLING
            budget -= chunk
            tokens += chunk
            pairs += chunk_pairs(chunk, w_reused)
            n_prefill += 1
            if waiting == 1:
                mine = n_run
            else:
                node = Q[node, WAIT_NEXT]
            n_run += 1
            waiting -= 1
        if n_prefill == 0:
            if mine >= 0 and n_decode == n_run:
                done = _decode_tail(SF, F, n_run, mine, held, end, k, remaining, blocks)
                return first - t, ((done - first) / (output - 1) if output > 1 else 0.0)
            if n_decode == 0:
                raise RuntimeError("the forecast request can never be admitted (frozen KV blocks)")
            repeats = -1
            for j in range(n_run):
                if repeats < 0 or F[j, F_OUTPUT] - F[j, F_DECODED] < repeats:
                    repeats = F[j, F_OUTPUT] - F[j, F_DECODED]
        else:
            repeats = 1
        end = end + repeats * iteration_ms(SF, k, n_decode, held, tokens, pairs)


# ---------------------------------------------------------------------------------------------------- choice


@njit(cache=True)
def _best(a, b, members, count, wa, wb, largest):
    """policies.pick_by_latency's ranking over ``members[:count]``: the first member with the least (or, with
    ``largest``, the largest) ``wa n(a) + wb n(b)``, ``n`` min-max over the members (0 when they are all equal)."""
    lo_a = hi_a = a[members[0]]
    lo_b = hi_b = b[members[0]]
    for i in range(1, count):
        j = members[i]
        lo_a, hi_a, lo_b, hi_b = min(lo_a, a[j]), max(hi_a, a[j]), min(lo_b, b[j]), max(hi_b, b[j])
    best, best_value = -1, 0.0
    for i in range(count):
        j = members[i]
        na = 0.0 if hi_a == lo_a else (a[j] - lo_a) / (hi_a - lo_a)
        nb = 0.0 if hi_b == lo_b else (b[j] - lo_b) / (hi_b - lo_b)
        value = wa * na + wb * nb
        if best < 0 or (value > best_value if largest else value < best_value):
            best, best_value = j, value
    return best


@njit(cache=True)
def choose(ttft, tpot, prefix, idle, explore, settings, has_slo, h_ttft, h_tpot, members, tier):
    """policies.affinity_candidates, then policies.pick_by_latency (``settings``: ttft weight, affinity tau,
    maximum TTFT penalty, buffer, TTFT SLO, TPOT SLO; ``has_slo``: whether each SLO is given)."""
    w, tau, max_penalty, buffer, slo_ttft, slo_tpot = settings[0], settings[1], settings[2], settings[3], settings[4], settings[5]
    k_all, count = ttft.size, 0
    if not explore:
        best_all, best_sticky = ttft.min(), np.inf
        for k in range(k_all):
            if prefix[k] >= tau:
                members[count] = k
                count += 1
                best_sticky = min(best_sticky, ttft[k])
        if count and best_sticky > best_all + max_penalty:
            count = 0
    if count == 0:
        for k in range(k_all):
            members[k] = k
        count = k_all
    w_ttft, w_tpot = w, 1.0 - w
    if not has_slo[0] and not has_slo[1]:
        return _best(ttft, tpot, members, count, w_ttft, w_tpot, False)
    for i in range(count):
        k = members[i]
        h_ttft[k] = slo_ttft * buffer - ttft[k] if has_slo[0] else 0.0
        h_tpot[k] = slo_tpot * buffer - tpot[k] if has_slo[1] else 0.0
    if not has_slo[0]:
        w_ttft, w_tpot = 0.0, 1.0
    elif not has_slo[1]:
        w_ttft, w_tpot = 1.0, 0.0
    for kind in range(5):  # every headroom >= 0 (best fit); idle; TPOT-only negative; TTFT-only negative; both negative
        n = 0
        for i in range(count):
            k = members[i]
            if kind == 0:
                take = h_ttft[k] >= 0 and h_tpot[k] >= 0
            elif kind == 1:
                take = idle[k]
            else:
                take = (h_ttft[k] >= 0) == (kind == 2) and (h_tpot[k] >= 0) == (kind == 3)
            if take:
                tier[n] = k
                n += 1
        if n:
            if kind == 0:
                return _best(h_ttft, h_tpot, tier, n, w_ttft, w_tpot, False)
            if kind == 1:
                return _best(ttft, tpot, tier, n, w_ttft, w_tpot, False)
            return _best(h_ttft, h_tpot, tier, n, w_ttft, w_tpot, True)
    raise RuntimeError("every candidate is in a tier")

# ---------------------------------------------------------------------------------------------------- runs


@njit(cache=True)
def route_requests(i0, i1, origins, Q, QF, SI, SF, RUN, O, H, G, free, F, remaining, blocks, block, stride, draws, explore_probability,
           settings, has_slo, placement, predicted, scratch, members, tier):
    """policies.route with the predicted-latency scorer and the oracle: requests ``i0 .. i1 - 1``."""
    k_all = SI.shape[0]
    ttft, tpot, prefix, h_ttft, h_tpot = scratch[0], scratch[1], scratch[2], scratch[3], scratch[4]
    idle = np.empty(k_all, dtype=np.bool_)
    for i in range(i0, i1):
        t = QF[i, ARRIVAL]
        for k in range(k_all):
            advance(origins, Q, QF, SI, SF, RUN, O, H, G, free, k, t, block, stride)
        for k in range(k_all):
            hit = hit_blocks(origins, O, Q, i, k, block, stride)
            prefix[k] = (hit * block) / Q[i, PROMPT]
            idle[k] = SI[k, Q_LEN] == 0 and SI[k, N_RUN] == 0
            ttft[k], tpot[k] = forecast(origins, Q, SI, SF, RUN, O, F, remaining, blocks, k, i, hit, t, block, stride)
        k = choose(ttft, tpot, prefix, idle, draws[i] < explore_probability, settings, has_slo, h_ttft, h_tpot, members, tier)
        predicted[i, 0], predicted[i, 1] = ttft[k], tpot[k]
        enqueue(Q, SI, SF, RUN, k, i, t)
        placement[i] = k


@njit(cache=True)
def replay_requests(i0, i1, origins, Q, QF, SI, SF, RUN, O, H, G, free, block, stride, placement):
    """evaluate.replay: requests ``i0 .. i1 - 1`` on their servers."""
    for i in range(i0, i1):
        k, t = placement[i], QF[i, ARRIVAL]
        advance(origins, Q, QF, SI, SF, RUN, O, H, G, free, k, t, block, stride)
        enqueue(Q, SI, SF, RUN, k, i, t)


@njit(cache=True)
def drain(origins, Q, QF, SI, SF, RUN, O, H, G, free, block, stride):
    for k in range(SI.shape[0]):
        advance(origins, Q, QF, SI, SF, RUN, O, H, G, free, k, np.inf, block, stride)
