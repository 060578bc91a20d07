"""The assumptions that change a fleet's answer, stated once for the solve and gap headers and the JSON.

A plan is only as right as its service model: which engine times an
iteration (and whether prefill costs compute), the prefill chunk, the latency
targets and their percentiles, Compress-and-Route, the number of pools K and
the routing rule.  :func:`assumptions` lists them; :func:`assumption_lines`
words them for people.
"""

from __future__ import annotations

from typing import Any

from optfleet.numbers import significant
from optfleet.problems.fleet.problem import FleetProblem, PoolFactory


def _engine(problem: FleetProblem, factory: PoolFactory) -> dict[str, Any]:
    """One GPU configuration's engine: its source and, under the engine model, the affine form's largest error."""
    config = factory.pool(problem.long_window_tokens)
    if config.step is None:
        return {"gpu": factory.label, "source": f"paper: W {config.w_ms:.4g} ms + H {config.h_ms_per_slot:.4g} ms/slot, no prefill compute"}
    return {"gpu": factory.label, "source": config.step.source, "affine_max_error": config.step.max_error,
            "coefficients_at_long_window": config.step.coefficients()}


def assumptions(problem: FleetProblem) -> dict[str, Any]:
    """Every setting that changes the answer, by name (JSON-ready)."""
    factories = problem.options or (problem.hardware,)
    return {
        "preset": problem.preset,
        "prefill_compute_charged": problem.charges_prefill,
        "service_model": problem.service_model,
        "engines": [_engine(problem, f) for f in factories],
        "chunk_tokens": problem.pool(problem.long_window_tokens).chunk_tokens,
        "ttft_p99_ms": problem.ttft_p99_ms,
        "ttft_rule": problem.ttft_rule,
        "tpot_targets_ms": {**problem.tpot_percentile_targets, **({"mean": problem.tpot_mean_ms} if problem.tpot_mean_ms is not None else {})},
        "tpot_percentiles_checked_against": _tpot_measure(problem),
        "rho_max": problem.rho_max,
        "compression": ({"enabled": True, "compressible_fraction": problem.compressible_fraction, "gamma_max": max(problem.gammas)}
                        if problem.compression_enabled else {"enabled": False}),
        "max_pools": problem.max_pools,
        "milp_routing": problem.milp_routing,
    }


def _tpot_measure(problem: FleetProblem) -> str:
    """What a TPOT percentile target is compared with: the batching model's P99 under the engine model (so a P50 or P90
    target is checked conservatively), else the slot model's longest iteration, which bounds every percentile."""
    if problem.service_model == "batching" and problem.charges_prefill:
        return "the batching model's P99 TPOT"
    return "the longest iteration (bounds every percentile)"


def _engine_summary(engines: list[dict[str, Any]]) -> str:
    """One engine in full; several by source kind (``roofline for 8 configurations, affine form within 0.0-1.7 %``)."""
    def error(values: list[float]) -> str:
        low, high = 100 * min(values), 100 * max(values)
        return f" (affine form within {high:.1f} %)" if len(values) == 1 or f"{low:.1f}" == f"{high:.1f}" else f" (affine form within {low:.1f}-{high:.1f} %)"

    if len(engines) == 1:
        (e,) = engines
        return f"{e['gpu']}: {e['source']}" + (error([e["affine_max_error"]]) if "affine_max_error" in e else "")
    kinds: dict[str, list[dict[str, Any]]] = {}
    for e in engines:
        kinds.setdefault(e["source"].split(":")[0], []).append(e)
    parts = []
    for kind, group in kinds.items():
        errors = [e["affine_max_error"] for e in group if "affine_max_error" in e]
        parts.append(f"{kind} for {', '.join(e['gpu'] for e in group)}" + (error(errors) if errors else ""))
    return "; ".join(parts)


def assumption_lines(problem: FleetProblem) -> list[str]:
    """:func:`assumptions` in words, a few lines for a header."""
    a = assumptions(problem)
    model = ("engine model: prefill compute charged to the iterations that carry each chunk" if a["prefill_compute_charged"]
             else f"preset {a['preset']}: the paper's service model, prefill compute NOT charged (a chunk costs one iteration)")
    engines = _engine_summary(a["engines"])
    tpot = ", ".join(f"{k} {v:g} ms" for k, v in a["tpot_targets_ms"].items()) or "none"
    if any(k != "mean" for k in a["tpot_targets_ms"]):
        tpot += f" (percentiles checked against {a['tpot_percentiles_checked_against']})"
    comp = a["compression"]
    compression = (f"on (compressible share {comp['compressible_fraction']:g}, gamma up to {comp['gamma_max']:g})" if comp["enabled"] else "off")
    return [
        f"  {model}; service model {a['service_model']}" + (" (an approximation, checked against the batching simulator)"
                                                            if a["service_model"] == "batching" else ""),
        f"  iteration times: {engines}",
        f"  chunk {a['chunk_tokens']:,} tokens; P99 TTFT {significant(a['ttft_p99_ms'], 6)} ms (rule {a['ttft_rule']}); TPOT targets: {tpot}; "
        f"rho_max {a['rho_max']:g}",
        f"  compression {compression}; K = {a['max_pools']} pools; MILP: {a['milp_routing']} routing",
    ]
