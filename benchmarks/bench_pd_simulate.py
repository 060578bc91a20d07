"""Benchmark: the disaggregated-pool simulator (optfleet/problems/pd_fleet/simulate/) on a 70B-class pool.

The pool: Llama-3-70B on 4 x H100-SXM per instance (the roofline engine, reduced to its affine form over each role's
region), 24 prefill instances at a 2,048-token budget, 10 decode instances of at most 128 sequences, a 50 GB/s link
per prefill instance carrying 2 x 80 layers x 8 KV heads x 128 x 2 bytes = 327,680 bytes per prompt token; prompts
uniform on 1,000..8,000 tokens, outputs uniform on 100..700, Poisson arrivals at 54 requests/s.

1. Speed: 60,000 requests through the whole pool (best of 3 runs), and the decode stage alone against a naive
   per-token loop kept here only (:func:`per_token_decode`: one Python step per iteration and per running sequence),
   on the same inputs in the same process; the ratio of their times, and the largest difference between their
   first-token and last-token times (the two must agree to rounding).
2. The pool's figures over 3 replications of 60,000 requests (mean +- 95 % half-width).

Writes benchmarks/out/ (benchmarks/results/ with --publish): pd_simulate.json and pd_simulate.md.
Run: python benchmarks/bench_pd_simulate.py [--requests 60000] [--reps 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import deque

import numpy as np
from numpy.typing import NDArray

from optfleet.engine import affine_reduction, roofline_engine
from optfleet.hardware import get_model
from optfleet.problems.pd_fleet.roles import DecodeRole, PrefillRole, TransferLink
from optfleet.problems.pd_fleet.simulate import simulate_pool, simulate_requests
from optfleet.problems.pd_fleet.simulate.decode import simulate_decode

GPU, MODEL, TP = "H100-SXM", "Llama-3-70B", 4
PREFILL_INSTANCES, TOKEN_BUDGET, DECODE_INSTANCES, MAX_BATCH = 24, 2048, 10, 128
LINK_GB_PER_S, RATE_RPS = 50.0, 54.0
PROMPT_TOKENS, OUTPUT_TOKENS = (1000, 8000), (100, 700)
TTFT_TARGET_MS, TPOT_TARGET_MS = 1500.0, 50.0


def per_token_decode(role: DecodeRole, arrival_s: NDArray[np.float64], l_in: NDArray[np.int64], l_out: NDArray[np.int64],
                     instance: NDArray[np.int64]) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], int]:
    """The decode policy of roles.py stepped one iteration at a time, each running sequence updated one by one:
    (admission, first token, last token, tokens emitted).  The baseline of the speed ratio, and the brute force the
    tests hold the closed-form runs to."""
    count = len(arrival_s)
    admit, first, finish = np.full(count, np.nan), np.full(count, np.nan), np.full(count, np.nan)
    tokens = 0
    for g in range(role.instances):
        mine = sorted(np.flatnonzero(instance == g).tolist(), key=lambda i: (arrival_s[i], i))
        now, nxt = 0.0, 0
        running: list[list[int]] = []  # [request, iterations left, context tokens]
        waiting: deque[int] = deque()
        while True:
            while nxt < len(mine) and arrival_s[mine[nxt]] <= now:
                waiting.append(mine[nxt])
                nxt += 1
            while waiting and len(running) < role.max_batch:
                r = waiting.popleft()
                admit[r] = now
                running.append([r, int(l_out[r]), int(l_in[r])])
            if not running:
                if nxt == len(mine):
                    break
                now = float(arrival_s[mine[nxt]])
                continue
            now += float(role.step.step_ms(0, len(running), sum(e[2] for e in running))) / 1e3
            for entry in running:
                if first[entry[0]] != first[entry[0]]:
                    first[entry[0]] = now
                entry[1] -= 1
                entry[2] += 1
                tokens += 1
                if entry[1] == 0:
                    finish[entry[0]] = now
            running = [e for e in running if e[1] > 0]
    return admit, first, finish, tokens


def pool() -> tuple[PrefillRole, TransferLink, DecodeRole]:
    """The benchmark's pool (module docstring)."""
    model = get_model(MODEL)
    engine = roofline_engine(GPU, MODEL, TP)
    window = PROMPT_TOKENS[1] + OUTPUT_TOKENS[1]
    kv_bytes_per_token = 2 * model.layers * model.kv_heads * model.head_dim * 2
    prefill = PrefillRole(PREFILL_INSTANCES, affine_reduction(engine, 1, PROMPT_TOKENS[1], TOKEN_BUDGET), TOKEN_BUDGET)
    decode = DecodeRole(DECODE_INSTANCES, affine_reduction(engine, MAX_BATCH, window, TOKEN_BUDGET), MAX_BATCH)
    return prefill, TransferLink(LINK_GB_PER_S, float(kv_bytes_per_token)), decode


def main() -> int:
    from output import add_output_option, machine_speed, machine_speed_text, output_folder, write_results

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_option(parser)
    parser.add_argument("--requests", type=int, default=60_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    prefill, link, decode = pool()
    rng = np.random.default_rng(0)
    arrival = np.cumsum(rng.exponential(1.0 / RATE_RPS, size=args.requests))
    l_in = rng.integers(PROMPT_TOKENS[0], PROMPT_TOKENS[1] + 1, size=args.requests)
    l_out = rng.integers(OUTPUT_TOKENS[0], OUTPUT_TOKENS[1] + 1, size=args.requests)

    whole = []
    for _ in range(3):
        start = time.perf_counter()
        trace = simulate_requests(arrival, l_in, l_out, prefill, link, decode, np.random.default_rng(1))
        whole.append(time.perf_counter() - start)
    decode_args = (decode, trace.upstream.link_end_s, l_in, l_out, trace.decode_instance)
    start = time.perf_counter()
    simulate_decode(*decode_args)
    runs_s = time.perf_counter() - start
    start = time.perf_counter()
    admit, first, finish, tokens = per_token_decode(*decode_args)
    naive_s = time.perf_counter() - start
    gap_s = max(float(np.max(np.abs(first - trace.decode.first_token_s))), float(np.max(np.abs(finish - trace.decode.finish_s))),
                float(np.max(np.abs(admit - trace.decode.admit_s))))
    speed = {"requests": args.requests, "whole_pool_s": min(whole), "decode_runs_s": runs_s, "decode_per_token_s": naive_s,
             "ratio": naive_s / runs_s, "largest_time_difference_s": gap_s, "tokens": tokens, "tokens_runs": trace.decode.tokens,
             "runs": len(trace.decode.run_start_s), "machine": machine_speed()}
    print(f"{args.requests:,} requests: whole pool {min(whole):.2f} s (best of 3); decode stage {runs_s:.2f} s in closed-form runs vs "
          f"{naive_s:.1f} s per token: {speed['ratio']:.0f}x; largest time difference {gap_s:.1e} s; tokens {tokens:,} / {trace.decode.tokens:,}")

    start = time.perf_counter()
    mix = np.random.default_rng(2)  # the workload as 10^5 equally likely (L_in, L_out) pairs of the two uniforms
    result = simulate_pool(prefill, link, decode, rate_rps=RATE_RPS, l_in_tokens=mix.integers(PROMPT_TOKENS[0], PROMPT_TOKENS[1] + 1, 100_000),
                           l_out_tokens=mix.integers(OUTPUT_TOKENS[0], OUTPUT_TOKENS[1] + 1, 100_000),
                           requests=args.requests, reps=args.reps, ttft_target_ms=TTFT_TARGET_MS, tpot_target_ms=TPOT_TARGET_MS)
    pool_s = time.perf_counter() - start
    print(f"simulate_pool: {args.reps} x {args.requests:,} requests in {pool_s:.1f} s")
    for name, (mean, half) in result.metrics.items():
        print(f"  {name:24s} {mean:12.4f} +- {half:.4f}")

    folder = output_folder(args)
    rows = [
        ["whole pool, one replication (best of 3)", f"{min(whole):.2f}", "-", "-"],
        ["decode stage: closed-form runs", f"{runs_s:.2f}", "1", f"{len(trace.decode.run_start_s):,} runs"],
        ["decode stage: per-token loop (baseline)", f"{naive_s:.1f}", f"{speed['ratio']:.0f}", f"{tokens:,} tokens"],
        [f"simulate_pool, {args.reps} replications", f"{pool_s:.1f}", "-", "-"],
    ]
    write_results(folder, "pd_simulate", {"pool": pool_text(prefill, link, decode), "speed": speed, "pool_s": pool_s,
                                          "metrics": result.to_dict()}, ["run", "seconds", "x runs", "work"], rows)
    metrics = "\n".join(f"| {name} | {mean:.4g} | {half:.2g} |" for name, (mean, half) in result.metrics.items())
    text = (folder / "pd_simulate.md").read_text()
    (folder / "pd_simulate.md").write_text(
        f"{pool_text(prefill, link, decode)}; {args.requests:,} requests. Machine: {machine_speed_text(speed['machine'])}.\n\n{text}\n"
        f"Largest difference between the two decode simulations' admission, first and last token times: {gap_s:.1e} s.\n\n"
        f"The pool's figures, {args.reps} replications (targets: TTFT {TTFT_TARGET_MS:g} ms, TPOT {TPOT_TARGET_MS:g} ms):\n\n"
        f"| metric | mean | 95 % half-width |\n|---|---|---|\n{metrics}\n")
    return 0


def pool_text(prefill: PrefillRole, link: TransferLink, decode: DecodeRole) -> str:
    return (f"{MODEL} on {TP} x {GPU}: {prefill.instances} prefill instances (budget {prefill.token_budget}), {decode.instances} decode "
            f"instances (max batch {decode.max_batch}), link {link.gb_per_s:g} GB/s x {link.kv_bytes_per_token:,.0f} B/token, "
            f"{RATE_RPS:g} req/s, prompts {PROMPT_TOKENS[0]}..{PROMPT_TOKENS[1]}, outputs {OUTPUT_TOKENS[0]}..{OUTPUT_TOKENS[1]} tokens")


if __name__ == "__main__":
    sys.exit(main())
