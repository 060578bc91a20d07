"""Benchmark: the Compress-and-Route compressor on borderline prompts, greedy against the exact knapsack, in one run.

Corpus: ``--prompts`` requests cut from the Python documentation topics (optfleet/compress/corpus.py; PSF
License) with ``L_total = L_in + L_out`` uniform in the borderline band ``(B, 1.5 B]``, ``B = 8,192``,
``L_out = 512`` (FleetOpt Appendix C's band: prompts of 8K-12K tokens), compressed to ``T_c = B - L_out``.
The process is pinned to one core with one BLAS thread (the paper measures one core of a Xeon Platinum 8568Y+).

Measured per prompt:

* the compressor's end-to-end latency (``optfleet.compress.compress``, greedy), after one warm-up call,
  and its stages, each timed alone (the median of ``--repeats`` runs): the sentence split, the token counts
  (the prompt, the candidate sentences and the compressed text), the term count matrix, TextRank (the
  PageRank power iteration on the similarity matrix), the rest of the scoring (cosines, TF-IDF, novelty) and
  the greedy fill with the join; what the stages leave of the median latency is the glue between them;
* the greedy fill alone; the exact selection as ``optfleet compress --exact`` runs it (the knapsack's dynamic
  program gives the optimum, HiGHS checks it as a MIP start against it as a known bound); and the knapsack MILP
  with HiGHS's own proof (``solve_arrays``, no presolve, started from the better greedy selection after
  reduced-cost fixing, relative gap 1e-9): their times, the status, the bound (both agree, asserted), and the
  greedy selection's gap to the bound ``100 (bound - greedy) / bound``; the same for the score-per-token
  greedy (Dantzig's);
* fidelity of the greedy and the exact selections (ROUGE-L recall, TF-IDF cosine, token reduction;
  optfleet/compress/fidelity.py) beside the paper's Table 7.

Writes benchmarks/out/ (benchmarks/results/ with --publish): compress.json and compress.md.

Run: python benchmarks/bench_compress.py [--prompts 60] [--repeats 3] [--publish]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core: before numpy loads its BLAS
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from output import add_output_option, machine_speed, machine_speed_text, output_folder, write_results  # noqa: E402

BUDGET_TOKENS = 8192
GAMMA = 1.5
OUTPUT_TOKENS = 512
# FleetOpt (Chen et al.), Table 4 (latency, ms, one core of a Xeon Platinum 8568Y+) and Table 7 (fidelity, 300 LMSYS prompts).
PAPER_LATENCY_MS = {"Azure (B 4,096)": (1.8, 4.2, 6.5), "LMSYS (B 1,536)": (1.2, 3.1, 5.2), "Agent-heavy (B 8,192)": (3.4, 6.2, 7.8)}
PAPER_FIDELITY = {"rouge_l_recall": (0.856, 0.783, 0.861, 0.921), "tfidf_cosine": (0.981, 0.963, 0.984, 0.996)}
PAPER_TOKEN_REDUCTION = 0.154
MILP_TARGET_MS = 50.0


def measure(prompt: str, repeats: int) -> dict:
    """Every measurement of one prompt (see the module docstring)."""
    from optfleet.compress import Objective, compress, prepare
    from optfleet.compress.exact import exact_selection
    from optfleet.compress.fidelity import fidelity
    from optfleet.compress.selection import greedy_selection, selection_value

    latencies = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = compress(prompt, BUDGET_TOKENS, OUTPUT_TOKENS)
        latencies.append(1e3 * (time.perf_counter() - start))
    prompt_budget = BUDGET_TOKENS - OUTPUT_TOKENS
    assert result.compressed_tokens + OUTPUT_TOKENS <= BUDGET_TOKENS
    prepared = prepare(prompt)
    similarity, scores = prepared.scores.similarity, prepared.scores.composite
    start = time.perf_counter()
    greedy = greedy_selection(scores, prepared.tokens, prepared.keep, prompt_budget)
    greedy_ms = 1e3 * (time.perf_counter() - start)
    dantzig = greedy_selection(scores, prepared.tokens, prepared.keep, prompt_budget, per_token=True)
    start = time.perf_counter()

    def value(selection) -> float:
        return selection_value(selection, scores, similarity, Objective())

    chosen, report = exact_selection(scores, prepared.tokens, prepared.keep, prompt_budget, similarity, Objective(),
                                     start=max((greedy, dantzig), key=value))
    exact_ms = 1e3 * (time.perf_counter() - start)
    start = time.perf_counter()
    _, by_highs = exact_selection(scores, prepared.tokens, prepared.keep, prompt_budget, similarity, Objective(),
                                  start=max((greedy, dantzig), key=value), dynamic_program=False)
    milp_ms = 1e3 * (time.perf_counter() - start)
    assert by_highs.status == "optimal" and abs(by_highs.objective - report.objective) <= 1e-9 * max(1.0, report.objective)

    exact_text = prepared.join(chosen)
    assert prepared.tokens[chosen].sum() <= prompt_budget and report.status == "optimal"
    return {
        "prompt_tokens": result.original_tokens, "sentences": result.sentences, "candidates": result.candidates,
        "latency_ms": latencies, "stage_ms": stage_ms(prompt, prepared, result.text, repeats), "greedy_ms": greedy_ms, "exact_ms": exact_ms, "milp_ms": milp_ms,
        "milp_status": by_highs.status, "fixed_by_reduced_cost": by_highs.counts["fixed_by_reduced_cost"], "milp_bound": report.bound, "milp_objective": report.objective,
        "greedy_value": value(greedy), "dantzig_value": value(dantzig),
        "greedy_gap_pct": 100 * (report.bound - value(greedy)) / report.bound,
        "dantzig_gap_pct": 100 * (report.bound - value(dantzig)) / report.bound,
        "fits": result.fits,
        "greedy_fidelity": fidelity(prompt, result.text).to_dict(), "exact_fidelity": fidelity(prompt, exact_text).to_dict(),
    }


def stage_ms(prompt: str, prepared, compressed: str, repeats: int) -> dict[str, float]:
    """The greedy compressor's stages on ``prompt``, each timed alone: the median of ``repeats`` runs, in ms."""
    from optfleet.compress import approx_tokens, split_sentences
    from optfleet.compress.scoring import score_sentences, term_counts, textrank
    from optfleet.compress.selection import greedy_selection

    texts = [prepared.sentences[i].text for i in prepared.candidates.tolist()]
    similarity, scores = prepared.scores.similarity, prepared.scores.composite
    stages = {
        "sentence split": lambda: split_sentences(prompt),
        "token counts": lambda: (approx_tokens(prompt), list(map(approx_tokens, texts)), approx_tokens(compressed)),
        "term counts": lambda: term_counts(texts),
        "TextRank": lambda: textrank(similarity),
        "scoring": lambda: score_sentences(texts),
        "greedy fill and join": lambda: prepared.join(greedy_selection(scores, prepared.tokens, prepared.keep,
                                                                       BUDGET_TOKENS - OUTPUT_TOKENS)),
    }
    timed = {name: float(np.median([_milliseconds(run) for _ in range(repeats)])) for name, run in stages.items()}
    scoring = timed.pop("scoring")
    timed["cosines, TF-IDF, novelty"] = scoring - timed["term counts"] - timed["TextRank"]
    return timed


def _milliseconds(run) -> float:
    start = time.perf_counter()
    run()
    return 1e3 * (time.perf_counter() - start)


def _quantiles(values, qs=(50, 95, 99)) -> list[float]:
    return [float(np.percentile(values, q)) for q in qs]


def summarise(rows: list[dict]) -> dict:
    latency = np.concatenate([row["latency_ms"] for row in rows])
    summary = {
        "latency_ms_p50_p95_p99": _quantiles(latency),
        "stage_ms_p50": {name: float(np.median([r["stage_ms"][name] for r in rows])) for name in rows[0]["stage_ms"]},
        "greedy_ms_p50": float(np.median([r["greedy_ms"] for r in rows])),
        "exact_ms_p50_p90_max": _quantiles([r["exact_ms"] for r in rows], (50, 90, 100)),
        "exact_within_target": sum(r["exact_ms"] <= MILP_TARGET_MS for r in rows),
        "exact_ms_at_500_p50_p90_max": _quantiles([r["exact_ms"] for r in rows if r["candidates"] == 500] or [float("nan")], (50, 90, 100)),
        "milp_ms_p50_p90_max": _quantiles([r["milp_ms"] for r in rows], (50, 90, 100)),
        "milp_within_target": sum(r["milp_ms"] <= MILP_TARGET_MS for r in rows),
        "milp_ms_at_500_p50_p90_max": _quantiles([r["milp_ms"] for r in rows if r["candidates"] == 500] or [float("nan")], (50, 90, 100)),
        "prompts_at_500": sum(r["candidates"] == 500 for r in rows),
        "fixed_share_p50": float(np.median([r["fixed_by_reduced_cost"] / r["candidates"] for r in rows])),
        "milp_optimal": sum(r["milp_status"] == "optimal" for r in rows),
        "capped_prompts": sum(r["sentences"] > r["candidates"] for r in rows),
        "compressibility": float(np.mean([r["fits"] for r in rows])),
    }
    for name in ("greedy_gap_pct", "dantzig_gap_pct"):
        values = [r[name] for r in rows]
        summary[name] = {"mean": float(np.mean(values)), **{f"p{q}": float(np.percentile(values, q)) for q in (10, 50, 90)}, "max": float(max(values))}
    for selection in ("greedy", "exact"):
        for metric in ("rouge_l_recall", "tfidf_cosine", "token_reduction"):
            values = [r[f"{selection}_fidelity"][metric] for r in rows]
            summary[f"{selection}_{metric}"] = [float(np.mean(values)), *(float(np.percentile(values, q)) for q in (10, 50, 90))]
    return summary


def table(s: dict, prompts: int, tokens: tuple[int, int]) -> list[list[str]]:
    def dist(values: list[float], pct: bool = False) -> str:
        scale, unit = (100, " %") if pct else (1, "")
        mean, *qs = values
        return f"{scale * mean:.3g}{unit} ({' / '.join(f'{scale * q:.3g}' for q in qs)})"

    def gap(g: dict) -> str:
        return f"{g['mean']:.2f} % (p50 {g['p50']:.2f}, p90 {g['p90']:.2f}, max {g['max']:.2f})"

    stages = dict(s["stage_ms_p50"])
    stages["glue (the median latency less the stages)"] = s["latency_ms_p50_p95_p99"][0] - sum(stages.values())
    paper_latency = "; ".join(f"{k} {p50} / {p95} / {p99}" for k, (p50, p95, p99) in PAPER_LATENCY_MS.items())
    p = PAPER_FIDELITY
    return [
        ["prompts", f"{prompts} from the Python docs, prompts of {tokens[0]:,}-{tokens[1]:,} tokens, B = {BUDGET_TOKENS:,}, L_out = {OUTPUT_TOKENS}",
         "300 LMSYS-Chat-1M prompts, band 8,192-12,288"],
        ["compressor latency p50 / p95 / p99, one core", " / ".join(f"{v:.1f}" for v in s["latency_ms_p50_p95_p99"]) + " ms",
         paper_latency + " ms (2-7 ms)"],
        ["of which, p50 (each stage timed alone)", "; ".join(f"{name} {ms:.2f}" for name, ms in stages.items()) + " ms", "-"],
        ["greedy fill alone, p50", f"{s['greedy_ms_p50']:.2f} ms", "-"],
        ["exact selection (dynamic program's optimum, checked by HiGHS) p50 / p90 / max", " / ".join(f"{v:.1f}" for v in s["exact_ms_p50_p90_max"]) +
         f" ms; {s['exact_within_target']}/{prompts} within {MILP_TARGET_MS:.0f} ms; at 500 sentences " +
         " / ".join(f"{v:.1f}" for v in s["exact_ms_at_500_p50_p90_max"]) + " ms", f"target <= {MILP_TARGET_MS:.0f} ms"],
        ["knapsack MILP, HiGHS's own proof (<= 500 sentences) p50 / p90 / max", " / ".join(f"{v:.1f}" for v in s["milp_ms_p50_p90_max"]) +
         f" ms; {s['milp_optimal']}/{prompts} proven optimal, {s['milp_within_target']}/{prompts} within {MILP_TARGET_MS:.0f} ms; "
         f"p50 x{s['milp_ms_p50_p90_max'][0] / s['greedy_ms_p50']:.0f} the greedy fill's; "
         f"{100 * s['fixed_share_p50']:.0f} % of the sentences fixed by reduced costs (median)",
         f"target <= {MILP_TARGET_MS:.0f} ms"],
        [f"of which at 500 sentences ({s['prompts_at_500']} prompts) p50 / p90 / max",
         " / ".join(f"{v:.1f}" for v in s["milp_ms_at_500_p50_p90_max"]) + " ms", f"target <= {MILP_TARGET_MS:.0f} ms"],
        ["greedy (paper, by score) gap to the MILP bound: mean (p50, p90, max)", gap(s["greedy_gap_pct"]), "-"],
        ["greedy by score per token (Dantzig) gap", gap(s["dantzig_gap_pct"]), "-"],
        ["ROUGE-L recall, greedy: mean (p10 / p50 / p90)", dist(s["greedy_rouge_l_recall"]), dist(list(p["rouge_l_recall"]))],
        ["ROUGE-L recall, exact", dist(s["exact_rouge_l_recall"]), "-"],
        ["TF-IDF cosine, greedy", dist(s["greedy_tfidf_cosine"]), dist(list(p["tfidf_cosine"]))],
        ["TF-IDF cosine, exact", dist(s["exact_tfidf_cosine"]), "-"],
        ["token reduction, greedy / exact (mean)", f"{100 * s['greedy_token_reduction'][0]:.1f} % / {100 * s['exact_token_reduction'][0]:.1f} %",
         f"{100 * PAPER_TOKEN_REDUCTION:.1f} %"],
        ["compressibility p_c (within T_c)", f"{s['compressibility']:.2f}; {s['capped_prompts']}/{prompts} prompts over 500 sentences (sampled)", "1.00"],
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=60, help="borderline prompts (default 60)")
    parser.add_argument("--repeats", type=int, default=3, help="timed compressions per prompt (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    add_output_option(parser)
    args = parser.parse_args()
    folder = output_folder(args)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    from optfleet.compress import compress
    from optfleet.compress.corpus import SOURCE, borderline_requests

    requests = borderline_requests(args.prompts, budget_tokens=BUDGET_TOKENS, gamma=GAMMA, output_tokens=OUTPUT_TOKENS, seed=args.seed)
    compress(requests[0].prompt, BUDGET_TOKENS, OUTPUT_TOKENS, method="exact")  # warm-up: imports (HiGHS too) and first calls
    rows = []
    for i, request in enumerate(requests):
        rows.append(measure(request.prompt, args.repeats))
        print(f"prompt {i + 1}/{len(requests)}: {rows[-1]['prompt_tokens']} tokens, {np.median(rows[-1]['latency_ms']):.1f} ms, "
              f"exact {rows[-1]['exact_ms']:.1f} ms, MILP {rows[-1]['milp_ms']:.1f} ms, greedy gap {rows[-1]['greedy_gap_pct']:.2f} %", file=sys.stderr)
    summary = summarise(rows)
    tokens = (min(r["prompt_tokens"] for r in rows), max(r["prompt_tokens"] for r in rows))
    speed = machine_speed()
    rows_md = [*table(summary, len(rows), tokens), ["machine speed in this run (reference workloads)", machine_speed_text(speed), "-"]]
    for measure_name, ours, paper in rows_md:
        print(f"{measure_name:70s} {ours:60s} paper: {paper}")
    data = {"corpus": SOURCE, "budget_tokens": BUDGET_TOKENS, "gamma": GAMMA, "output_tokens": OUTPUT_TOKENS, "seed": args.seed,
            "repeats": args.repeats, "machine": f"{platform.processor() or platform.machine()}, Python {platform.python_version()}",
            "machine_speed": speed, "summary": summary, "prompts": rows}
    write_results(folder, "compress", data, ["measure", "optfleet (this run)", "paper (FleetOpt, Tables 4 and 7)"], rows_md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
