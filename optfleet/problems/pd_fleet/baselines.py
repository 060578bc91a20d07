"""The literature's sizing rules for one disaggregated (xPyD) pool, reproduced as labelled baselines.

Each rule sizes the prefill and decode instances of one pool the way a published tool does, from the pool's request
mix (``l_in``, ``l_out``, ``weight``), its rate ``lambda`` (``rate_rps``), the prefill engine (an
:class:`~optfleet.engine.step.EngineModel` and its token budget ``B``), the decode engine (an EngineModel and its
``max_batch``) and the targets ``ttft_ms`` and ``tpot_ms`` (the inter-token latency, ITL).  Each returns a frozen
record with ``prefill_instances``, ``decode_instances``, ``assumes`` (what the rule takes for granted, one
paragraph) and the intermediate numbers it sized with.  They are pure functions: no Pyomo, no instance file; the
pool's evaluator scores their plans like any other.

Both rules work from **means** and from throughput **without a queue**, so neither says anything about a
percentile: a plan they return can miss a P99 TTFT target by a wide margin near saturation (the motivation of
percentile sizing: Dynamo's users ask for P95/P99 TTFT and queueing headroom, ai-dynamo/dynamo#10528, and a
percentile-SLA change to aiconfigurator found the mean TTFT estimate about 30 % low, ai-dynamo/aiconfigurator#1380).

The time to prefill a prompt of ``L`` tokens on an idle prefill instance is the serving policy's
(roles.py): ``m = ceil(L / B)`` chunks, chunk ``i`` of ``p_i = min(B, L - i B)`` tokens at offset ``o_i = i B``,

    T_pf(L) = sum_i step_ms(p_i, 0, 0, o_i)                                                     (1)

and one decode iteration of ``b`` sequences of ``k`` context tokens each takes

    ITL(b, k) = step_ms(0, b, b k).                                                               (2)

**Dynamo's SLA planner** (:func:`dynamo_sla_sizing`).
Read in ai-dynamo/dynamo: ``components/planner/src/dynamo/planner/utils/planner_core.py``,
``Planner._compute_replica_requirements`` (commit 07619258a49d18dfad139cb67f67f34c6993e1b8), its interpolators
``components/planner/src/dynamo/planner/utils/perf_interpolation.py`` (``PrefillInterpolator``,
``DecodeInterpolator.find_best_throughput_per_gpu``, commit 52787de13ad794e748a4ccfa8157c5864bcca7a9), the profilers
that fill them, ``benchmarks/profiler/utils/profile_prefill.py`` (commit 29a1dbd0821e2e5982c8286f8a6c90da5e850c4b)
and ``benchmarks/profiler/utils/profile_decode.py`` (commit 0441e905f1c06a1eb159ace45146cc74c52a261a), and
``docs/planner/sla_planner.md``.  The profiler measures the TTFT of one prompt of each ISL alone on a prefill
engine and stores the throughput ``ISL / TTFT(ISL)``; it measures decode ITL and throughput at fixed concurrencies
against (KV usage, context).  The planner, with the predicted request rate and the mean ISL and OSL::

    prefill:  x = ceil(lambda E[L_in] / (E[L_in] / T_pf(E[L_in])))  =  ceil(lambda T_pf(E[L_in]))      (3)
    decode:   k* = E[L_in] + E[L_out] / 2,
              b* = the largest concurrency b <= max_batch with ITL(b, k*) <= tpot_ms,
              y = ceil(lambda E[L_out] / (1000 b* / ITL(b*, k*)))                                   (4)

(correction factors 1: at planning time nothing has been observed yet).  We use our engine model in place of their
profiled interpolation: (3) evaluates (1) at the mean prompt, (4) evaluates (2) at the mean context; their KV-usage
axis (concurrency x context / KV capacity) becomes the concurrency limit ``max_batch``.  As in their
``find_best_throughput_per_gpu``, when no concurrency meets the ITL target the rule falls back to the smallest
(``b* = 1``) and says so (``itl_met = False``); the TTFT target is not in (3) at all (their profiler used it to pick
the engine configuration), so the record says whether the mean prompt's prefill alone meets it
(``ttft_met_without_queue``).

**The xPyD ratio at fixed concurrency** (:func:`xpyd_ratio_sizing`).
Read in ai-dynamo/aiconfigurator (commit 095f58a51c4ca8e61b66ec108d86f223f8d559ce):
``src/aiconfigurator/sdk/inference_session.py``, ``DisaggInferenceSession.find_best_disagg_result_under_constraints``
(its ``_match_workers`` and ``_find_best_result_under_constraints``), ``src/aiconfigurator/sdk/picking.py``
(``_build_disagg_summary_dict`` and the constants ``_RATE_MATCHING_PREFILL_DEGRADATION_FACTOR = 0.9``,
``_RATE_MATCHING_DECODE_DEGRADATION_FACTOR = 0.92``, ``_AUTOSCALE_TTFT_CORRECTION_FACTOR = 1.8``),
``src/aiconfigurator/sdk/pareto_analysis.py`` (``get_best_configs_for_target_load``: replicas
``ceil(rate / seq/s)``) and ``src/aiconfigurator/sdk/task_v2.py`` (worker lists ``1..32`` by default).  The same
throughput-ratio idea is DistServe's (Zhong et al., OSDI'24, Algorithm 1: ``n = ceil(R / goodput_prefill)``,
``m = ceil(R / goodput_decode)``; in LLMServe/DistServe, commit 82831f1604cc6b10bebd360f6c437a07790dde9f,
``simdistserve/benchmarks/search_binary.py`` finds a configuration's per-GPU goodput by bisecting the rate in its
simulator); aiconfigurator replaces the simulated goodput by throughput at a fixed concurrency, as here::

    prefill:  c_p = 1 (roles.py: a prefill instance serves one prompt at a time),
              T_p = T_pf(E[L_in]) must meet  ttft_correction T_p <= ttft_ms,   P = 1000 c_p / T_p  seq/s     (5)
    decode:   TPOT(b) = mean of ITL(b, E[L_in] + j) over the request's n = round(E[L_out]) steps j = 0..n-1,
              c_d = the b <= max_batch with TPOT(b) <= tpot_ms that maximises D(b) = 1000 b / (n TPOT(b))   (6)
    ratio:    (x, y) in {1..N}^2 maximising  min(f_p x P, f_d y D) / (x g_p + y g_d)                         (7)
    scale:    r = ceil(lambda / min(f_p x P, f_d y D)),   prefill r x, decode r y instances                  (8)

with ``f_p = 0.9``, ``f_d = 0.92`` (their rate-matching degradation factors), ``ttft_correction = 1.8`` (their
allowance for queueing at the prefill, a fixed factor), ``N = 32`` and ``g_p``, ``g_d`` the GPUs per instance.
aiconfigurator also sweeps packed prefill batches up to ``max_num_tokens / ISL`` prompts per pass; our prefill role
does not pack prompts (roles.py), so ``c_p = 1``.  It divides the decode time of a request by ``osl - 1`` steps (the
first token counted in the prefill's TTFT); our decode role runs all ``L_out`` iterations, so (6) divides by
``n``.  Where no configuration meets a target the tool finds none; so does the rule (:class:`InfeasibleError`).

Because (7) maximises throughput per GPU of one xPyD unit and (8) then buys whole units, the rule can buy more
instances under a looser target: a faster decode instance can make a larger unit (say 9P10D instead of 1P1D) the
more efficient one, and at a low rate one whole large unit costs more than a few small ones.

**Worked example.**  One prompt length, 1000 tokens in and 100 out, at 78 req/s; a prefill engine
``t = 10 + 0.04 p`` ms (a prompt alone: 50 ms), a decode engine ``t = 10 + 0.5 b`` ms; targets TTFT 150 ms and
ITL 40 ms.

>>> from optfleet.engine.step import AffineStep
>>> prefill = AffineStep(base_ms=10.0, per_seq_ms=0.0, per_kv_token_ms=0.0, per_prefill_token_ms=0.04,
...                      per_prefill_pair_ms=0.0)
>>> decode = AffineStep(base_ms=10.0, per_seq_ms=0.5, per_kv_token_ms=0.0, per_prefill_token_ms=0.0,
...                     per_prefill_pair_ms=0.0)
>>> pool = dict(prefill_step=prefill, token_budget=2048, decode_step=decode, max_batch=64, ttft_ms=150.0,
...             tpot_ms=40.0)
>>> dynamo = dynamo_sla_sizing([1000], [100], [1.0], 78.0, **pool)
>>> dynamo.prefill_instances, dynamo.decode_instances, dynamo.decode_concurrency, dynamo.ttft_met_without_queue
(4, 6, 60, True)

(3) gives ``ceil(78 x 0.05) = ceil(3.9) = 4`` prefill instances, 97.5 % busy; (4) runs 60 sequences at 40 ms,
1500 tokens/s per decode instance, for 7800 tokens/s: 6.  The mean prompt's 50 ms meets the TTFT target, so the
rule sees nothing wrong; but the P99 wait of an M/G/c queue at 3.9 erlangs on 4 servers (Kimura's approximation,
optfleet/queueing/kimura.py, deterministic service) is over a second, and it takes 5 prefill instances to bring the
P99 TTFT under 150 ms:

>>> from optfleet.queueing.kimura import wait_quantile_s
>>> [round(1e3 * float(wait_quantile_s(c, 3.9, 0.050, 0.0))) for c in (4, 5)]
[1137, 90]

The xPyD rule derates ``P = 20`` and ``D = 15`` req/s per instance to 18 and 13.8 and picks, among units of up to
32 workers a role, the one with the most throughput per GPU: 23P30D, 414 req/s, of which the 78 req/s need one.
Limited to 4 workers a role it picks 3P4D (54 req/s) and buys two:

>>> xpyd = xpyd_ratio_sizing([1000], [100], [1.0], 78.0, **pool)
>>> xpyd.ratio_prefill, xpyd.ratio_decode, xpyd.units, xpyd.prefill_instances + xpyd.decode_instances
(23, 30, 1, 53)
>>> small = xpyd_ratio_sizing([1000], [100], [1.0], 78.0, max_workers=4, **pool)
>>> small.prefill_instances, small.decode_instances
(6, 8)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.engine.step import EngineModel
from optfleet.errors import InfeasibleError, InputError
from optfleet.hardware.catalog import check_positive_int, check_positive_real
from optfleet.problems.pd_fleet.roles import chunked_prefill_ms

ROUND_OFF = 1e-9
"""A load this close above a whole number of instances is that number (float sums of rates and times)."""

DECODE_CELLS_PER_BLOCK = 1 << 20
"""(6) evaluates the engine on batches x decode steps in blocks of about this many cells (bounded memory)."""

AICONFIGURATOR_TTFT_CORRECTION = 1.8
AICONFIGURATOR_PREFILL_DERATE = 0.9
AICONFIGURATOR_DECODE_DERATE = 0.92
AICONFIGURATOR_MAX_WORKERS = 32

DYNAMO_ASSUMES = (
    "Dynamo SLA planner: sizes from the mean prompt and output lengths only; prefill throughput is one mean prompt "
    "prefilled alone (no queue, no waiting for a free prefill instance), so the TTFT target does not enter the "
    "prefill count; decode throughput is taken at the largest fixed concurrency whose ITL at the mean context "
    "(input + output / 2) meets the target, as if every decode instance always ran at that concurrency; no KV "
    "transfer time; no percentile: a mean-load plan, with no headroom for queueing near saturation."
)


@dataclass(frozen=True)
class PoolSizing:
    """What every rule returns: the counts, what the rule assumes, and the means it sized with."""

    method: ClassVar[str]
    """The rule's name (``dynamo-sla``, ``xpyd-ratio``)."""

    prefill_instances: int
    decode_instances: int
    assumes: str
    """What the rule takes for granted, one paragraph (a label for every table the plan appears in)."""
    mean_prompt_tokens: float
    """``E[L_in]`` of the mix."""
    mean_output_tokens: float
    """``E[L_out]`` of the mix."""
    prefill_ttft_ms: float
    """``T_pf(E[L_in])``, equation (1): the mean prompt prefilled alone on an idle instance."""


@dataclass(frozen=True)
class DynamoSizing(PoolSizing):
    """One pool sized by Dynamo's SLA planner, equations (3) and (4) of the module docstring (``prefill_ttft_ms`` is
    their profiled TTFT)."""

    method: ClassVar[str] = "dynamo-sla"

    prefill_tokens_per_s: float
    """Per prefill instance: ``1000 E[L_in] / T_pf(E[L_in])``."""
    prefill_load_tokens_per_s: float
    """``lambda E[L_in]``."""
    ttft_met_without_queue: bool
    """Whether ``T_pf(E[L_in]) <= ttft_ms``: (3) does not look at the target."""
    decode_context_tokens: float
    """``k* = E[L_in] + E[L_out] / 2``."""
    decode_concurrency: int
    """``b*``: the largest concurrency whose ITL meets the target (1 if none does)."""
    decode_itl_ms: float
    """``ITL(b*, k*)``, equation (2)."""
    decode_tokens_per_s: float
    """Per decode instance: ``1000 b* / ITL(b*, k*)``."""
    decode_load_tokens_per_s: float
    """``lambda E[L_out]``."""
    itl_met: bool
    """Whether ``ITL(b*, k*) <= tpot_ms`` (False: even one sequence misses it; the rule sizes at ``b* = 1``)."""


@dataclass(frozen=True)
class XpydSizing(PoolSizing):
    """One pool sized by the xPyD ratio at fixed concurrency (aiconfigurator, DistServe), equations (5)-(8)
    (``prefill_ttft_ms`` is ``T_p``, before the TTFT correction)."""

    method: ClassVar[str] = "xpyd-ratio"

    prefill_concurrency: int
    """``c_p``: prompts a prefill instance serves at once (1 under roles.py's policy)."""
    prefill_seqs_per_s: float
    """``P``: requests per second one prefill instance prefills."""
    decode_concurrency: int
    """``c_d``: the decode batch that maximises ``D`` with TPOT within the target."""
    decode_tpot_ms: float
    """``TPOT(c_d)``: the mean ITL over the mean request's decode steps (6)."""
    decode_seqs_per_s: float
    """``D``: requests per second one decode instance finishes at ``c_d``."""
    ratio_prefill: int
    """``x`` of the xPyD unit (7)."""
    ratio_decode: int
    """``y`` of the xPyD unit (7)."""
    unit_seqs_per_s: float
    """``min(f_p x P, f_d y D)``: what one unit serves."""
    units: int
    """``r`` of (8)."""


def mean_lengths(l_in: ArrayLike, l_out: ArrayLike, weight: ArrayLike) -> tuple[float, float]:
    """``(E[L_in], E[L_out])`` of the mix, weighted by ``weight`` (normalised); each field checked."""
    lengths_in = _finite_array("l_in", l_in)
    lengths_out = _finite_array("l_out", l_out)
    w = _finite_array("weight", weight)
    if not (lengths_in.shape == lengths_out.shape == w.shape) or lengths_in.ndim != 1 or lengths_in.size == 0:
        raise InputError("l_in", lengths_in.shape, f"l_in, l_out and weight must be 1-d of one length >= 1; got "
                         f"{lengths_in.shape}, {lengths_out.shape}, {w.shape}")
    for field, values in (("l_in", lengths_in), ("l_out", lengths_out)):
        if values.min() < 1:
            raise InputError(field, float(values.min()), "every length must be at least 1 token")
    if w.min() < 0 or not w.sum() > 0:
        raise InputError("weight", float(w.min()) if w.min() < 0 else float(w.sum()),
                         "weights must be >= 0 with a positive sum")
    p = w / w.sum()
    return float(p @ lengths_in), float(p @ lengths_out)


def prompt_prefill_ms(step: EngineModel, prompt_tokens: float, token_budget: int) -> float:
    """Equation (1): a prompt of ``L`` tokens prefilled alone, ``ceil(L / B)`` chunks of at most ``B`` tokens
    (roles.chunked_prefill_ms)."""
    return float(chunked_prefill_ms(step, prompt_tokens, token_budget)[0])


def dynamo_sla_sizing(l_in: ArrayLike, l_out: ArrayLike, weight: ArrayLike, rate_rps: float, *,
                      prefill_step: EngineModel, token_budget: int, decode_step: EngineModel, max_batch: int,
                      ttft_ms: float, tpot_ms: float) -> DynamoSizing:
    """Size one disaggregated pool as Dynamo's SLA planner does: equations (3) and (4) of the module docstring
    (``planner_core.py``, ``_compute_replica_requirements``), our engine model in place of its profiled
    interpolation.  Mean-based; see ``assumes``."""
    mean_in, mean_out = mean_lengths(l_in, l_out, weight)
    _check_targets(rate_rps, token_budget, max_batch, ttft_ms, tpot_ms)
    prefill_ms = prompt_prefill_ms(prefill_step, mean_in, token_budget)
    prefill_tokens_per_s = 1e3 * mean_in / prefill_ms
    context = mean_in + mean_out / 2.0
    batches = np.arange(1, max_batch + 1)
    itl = np.asarray(decode_step.decode_ms(batches, context), dtype=np.float64)
    meeting = np.flatnonzero(itl <= tpot_ms)
    b = int(batches[meeting[-1]]) if meeting.size else 1
    decode_tokens_per_s = 1e3 * b / float(itl[b - 1])
    return DynamoSizing(
        prefill_instances=whole_instances(rate_rps * mean_in / prefill_tokens_per_s),
        decode_instances=whole_instances(rate_rps * mean_out / decode_tokens_per_s),
        assumes=DYNAMO_ASSUMES, mean_prompt_tokens=mean_in, mean_output_tokens=mean_out,
        prefill_ttft_ms=prefill_ms, prefill_tokens_per_s=prefill_tokens_per_s,
        prefill_load_tokens_per_s=rate_rps * mean_in, ttft_met_without_queue=prefill_ms <= ttft_ms,
        decode_context_tokens=context, decode_concurrency=b, decode_itl_ms=float(itl[b - 1]),
        decode_tokens_per_s=decode_tokens_per_s, decode_load_tokens_per_s=rate_rps * mean_out,
        itl_met=bool(meeting.size))


def xpyd_ratio_sizing(l_in: ArrayLike, l_out: ArrayLike, weight: ArrayLike, rate_rps: float, *,
                      prefill_step: EngineModel, token_budget: int, decode_step: EngineModel, max_batch: int,
                      ttft_ms: float, tpot_ms: float, prefill_gpus: int = 1, decode_gpus: int = 1,
                      max_workers: int = AICONFIGURATOR_MAX_WORKERS,
                      ttft_correction: float = AICONFIGURATOR_TTFT_CORRECTION,
                      prefill_derate: float = AICONFIGURATOR_PREFILL_DERATE,
                      decode_derate: float = AICONFIGURATOR_DECODE_DERATE) -> XpydSizing:
    """Size one disaggregated pool by the xPyD ratio at fixed concurrency: equations (5)-(8) of the module docstring
    (aiconfigurator's rate matching and load match; DistServe's per-phase throughput ratio).  The defaults are
    aiconfigurator's constants.  No queue; see ``assumes``.  Raises :class:`InfeasibleError` when no prefill or no
    decode batch meets its target, as the tool then finds no configuration."""
    mean_in, mean_out = mean_lengths(l_in, l_out, weight)
    _check_targets(rate_rps, token_budget, max_batch, ttft_ms, tpot_ms)
    for field, value in (("prefill_gpus", prefill_gpus), ("decode_gpus", decode_gpus), ("max_workers", max_workers)):
        check_positive_int(field, value)
    for field, value in (("ttft_correction", ttft_correction), ("prefill_derate", prefill_derate),
                         ("decode_derate", decode_derate)):
        check_positive_real(field, value)
    prefill_ms = prompt_prefill_ms(prefill_step, mean_in, token_budget)
    if ttft_correction * prefill_ms > ttft_ms:
        raise InfeasibleError(f"xpyd-ratio: the mean prompt ({mean_in:.0f} tokens) prefills alone in "
                              f"{prefill_ms:.4g} ms, x {ttft_correction:g} (the rule's queueing allowance) = "
                              f"{ttft_correction * prefill_ms:.4g} ms > ttft_ms = {ttft_ms:g}: no prefill "
                              f"configuration meets the TTFT target")
    prefill_seqs_per_s = 1e3 / prefill_ms
    b, tpot, decode_seqs_per_s = _best_decode_batch(decode_step, mean_in, mean_out, max_batch, tpot_ms)
    x, y, unit = _match_ratio(prefill_derate * prefill_seqs_per_s, prefill_gpus, decode_derate * decode_seqs_per_s,
                              decode_gpus, max_workers)
    units = whole_instances(rate_rps / unit)
    assumes = (f"xPyD ratio at fixed concurrency (aiconfigurator, DistServe): sizes from the mean prompt and "
               f"output lengths; a prefill instance serves one prompt at a time and its TTFT is the mean prompt "
               f"prefilled alone times {ttft_correction:g} (a fixed allowance for queueing, not a queue model); a "
               f"decode instance always runs {b} sequences (the batch with the most throughput within the TPOT "
               f"target); prefill and decode throughputs are derated by {prefill_derate:g} and {decode_derate:g}; the "
               f"{x}P{y}D unit with the most throughput per GPU is bought in whole units until they carry the mean "
               f"rate; no KV transfer time; no percentile.")
    return XpydSizing(
        prefill_instances=units * x, decode_instances=units * y, assumes=assumes,
        mean_prompt_tokens=mean_in, mean_output_tokens=mean_out, prefill_concurrency=1, prefill_ttft_ms=prefill_ms,
        prefill_seqs_per_s=prefill_seqs_per_s, decode_concurrency=b, decode_tpot_ms=tpot,
        decode_seqs_per_s=decode_seqs_per_s, ratio_prefill=x, ratio_decode=y, unit_seqs_per_s=unit, units=units)


SIZING_RULES: dict[str, Callable[..., PoolSizing]] = {
    DynamoSizing.method: dynamo_sla_sizing,
    XpydSizing.method: xpyd_ratio_sizing,
}
"""The rules by name; each takes ``(l_in, l_out, weight, rate_rps, *, prefill_step, token_budget, decode_step,
max_batch, ttft_ms, tpot_ms)`` and returns its :class:`PoolSizing`."""


def _best_decode_batch(step: EngineModel, mean_in: float, mean_out: float, max_batch: int,
                       tpot_ms: float) -> tuple[int, float, float]:
    """Equation (6): ``(c_d, TPOT(c_d), D(c_d))``, the smallest batch on a tie."""
    steps = max(1, round(mean_out))
    batches = np.arange(1, max_batch + 1, dtype=np.float64)
    tpot = np.zeros_like(batches)
    per_block = max(1, DECODE_CELLS_PER_BLOCK // max_batch)
    for first in range(0, steps, per_block):
        contexts = mean_in + np.arange(first, min(steps, first + per_block), dtype=np.float64)
        tpot += np.asarray(step.decode_ms(batches[:, None], contexts[None, :]), dtype=np.float64).sum(axis=1)
    tpot /= steps
    seqs_per_s = np.where(tpot <= tpot_ms, 1e3 * batches / (steps * tpot), -np.inf)
    best = int(np.argmax(seqs_per_s))
    if not np.isfinite(seqs_per_s[best]):
        raise InfeasibleError(f"xpyd-ratio: one decoding sequence of the mean request ({mean_in:.0f} + {mean_out:.0f} "
                              f"tokens) takes {tpot[0]:.4g} ms per token > tpot_ms = {tpot_ms:g}: no decode batch "
                              f"meets the TPOT target")
    return best + 1, float(tpot[best]), float(seqs_per_s[best])


def _match_ratio(prefill_seqs_per_s: float, prefill_gpus: int, decode_seqs_per_s: float, decode_gpus: int,
                 max_workers: int) -> tuple[int, int, float]:
    """Equation (7) over ``x, y = 1..N`` with the derated throughputs: ``(x, y, min(x P, y D))``.  Ties go to the
    first in aiconfigurator's loop order (decode count outer, prefill inner); values within a relative 1e-12 of the
    best are ties (a 2P2D unit equals 1P1D up to rounding)."""
    counts = np.arange(1, max_workers + 1, dtype=np.float64)
    served = np.minimum(prefill_seqs_per_s * counts[None, :], decode_seqs_per_s * counts[:, None])
    per_gpu = served / (prefill_gpus * counts[None, :] + decode_gpus * counts[:, None])
    decode_index, prefill_index = divmod(int(np.flatnonzero(per_gpu >= per_gpu.max() * (1.0 - 1e-12))[0]), max_workers)
    return prefill_index + 1, decode_index + 1, float(served[decode_index, prefill_index])


def whole_instances(need: float) -> int:
    """``ceil(need)``, at least 1, with a load within :data:`ROUND_OFF` above a whole number counted as that number."""
    return max(1, math.ceil(need - ROUND_OFF))


def _finite_array(field: str, values: ArrayLike) -> NDArray[np.float64]:
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(field, values, "must be an array of numbers") from None
    if not np.all(np.isfinite(array)):
        raise InputError(field, values, "every value must be finite")
    return array


def _check_targets(rate_rps: float, token_budget: int, max_batch: int, ttft_ms: float, tpot_ms: float) -> None:
    for field, value in (("rate_rps", rate_rps), ("ttft_ms", ttft_ms), ("tpot_ms", tpot_ms)):
        check_positive_real(field, value)
    check_positive_int("token_budget", token_budget)
    check_positive_int("max_batch", max_batch)
