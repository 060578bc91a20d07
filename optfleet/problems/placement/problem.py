"""A placement instance made ready to run: servers expanded, requests generated or loaded, policies resolved.

Cross-field checks (each an InputError naming the field): at least one server; every server's KV blocks hold the
largest request whole (``ceil((prompt + output) / B)`` blocks: admission reserves them, server.py), else that
request could never run there; policy labels unique and none the name of an exact method or of another registered
policy (it would replace that method's row); exact method names known; the ``ttft_excess`` objective needs
``slo.ttft_ms``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from optfleet.errors import InputError
from optfleet.instance.loader import LoadedInstance
from optfleet.problems.placement.schema import METHOD_NAMES, PlacementInstanceSpec, PolicySpec, SloSpec, SolveSpec
from optfleet.problems.placement.server import Engine
from optfleet.problems.placement.workload import Requests, build_requests


@dataclass(frozen=True)
class PolicyEntry:
    """One row of the comparison: a label, a registered policy name and its parameters."""

    label: str
    name: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PlacementProblem:
    name: str
    description: str
    engines: tuple[Engine, ...]
    block_tokens: int
    requests: Requests
    total_blocks: np.ndarray
    slo: SloSpec
    solve: SolveSpec
    policies: tuple[PolicyEntry, ...]
    seed: int
    source: str
    spec: PlacementInstanceSpec

    @property
    def objective(self) -> str:
        return self.solve.objective


def engines_of(spec: PlacementInstanceSpec, resolve: Callable[[str], Path], request_tokens: np.ndarray) -> tuple[Engine, ...]:
    """Every server's numbers, ``count`` times each entry: its ``timing`` as given, or derived from its ``hardware``
    by the engine model (server_hardware.py) for requests of ``request_tokens`` (prompt and output) each."""
    engines = []
    for i, s in enumerate(spec.servers):
        if s.hardware is not None:
            from optfleet.problems.placement.server_hardware import server_timing  # the engine sources: loaded only when used

            t = server_timing(s.hardware, resolve, max_running_seqs=s.max_running_seqs, prefill_budget_tokens=s.prefill_budget_tokens,
                              kv_capacity_blocks=s.kv_capacity_blocks, request_tokens=request_tokens,
                              block_tokens=spec.block_tokens, field=f"servers.{i}.hardware")
            capacity, source, reduction = t.kv_capacity_blocks, t.source, t.reduction
        else:
            assert s.timing is not None and s.kv_capacity_blocks is not None  # the schema asks for them
            t, capacity, source, reduction = s.timing, s.kv_capacity_blocks, "given", ""
        engine = Engine(s.name, s.max_running_seqs, capacity, s.prefill_budget_tokens, t.prefill_ms_per_token, t.step_base_ms,
                        t.step_ms_per_seq, t.step_ms_per_kv_block, t.prefill_ms_per_pair, source, reduction)
        engines.extend([engine] * s.count)
    return tuple(engines)


def _policies(spec: PlacementInstanceSpec) -> tuple[PolicyEntry, ...]:
    entries = []
    for i, p in enumerate(spec.policies):
        if isinstance(p, str):
            entries.append(PolicyEntry(p, p))
        else:
            assert isinstance(p, PolicySpec)
            params = p.model_dump(exclude_none=True, exclude={"name", "label"})
            entries.append(PolicyEntry(p.label or p.name, p.name, params))
    from optfleet.problems.placement.policies import POLICIES

    for i, e in enumerate(entries):
        if e.label in METHOD_NAMES or (e.label in POLICIES and e.label != e.name):
            what = "an exact method" if e.label in METHOD_NAMES else "another registered policy"
            raise InputError(f"policies[{i}].label", e.label, f"is the name of {what}; a label must name only this row (e.g. {e.name}_2)")
    labels = [e.label for e in entries]
    duplicate = next((label for label in labels if labels.count(label) > 1), None)
    if duplicate is not None:
        raise InputError("policies", duplicate, "two policies share this label (give one a label:)")
    return tuple(entries)


def prepare(loaded: LoadedInstance) -> PlacementProblem:
    """The instance in numbers (module docstring's checks)."""
    from optfleet.problems.placement.policies import make_policy

    spec = loaded.spec
    if not spec.servers:
        raise InputError("servers", [], "at least one server is needed")
    requests = build_requests(spec.workload, loaded.resolve)
    block = spec.block_tokens
    total_tokens = requests.prompt_tokens + requests.output_tokens
    total_blocks = -(-total_tokens // block)
    largest = int(total_blocks.max())
    engines = engines_of(spec, loaded.resolve, total_tokens)
    first = 0
    for i, s in enumerate(spec.servers):
        capacity = engines[first].kv_capacity_blocks
        first += s.count
        if capacity < largest:
            derived = "" if s.kv_capacity_blocks is not None else f" (derived from {s.hardware.tp} x {s.hardware.gpu}'s memory)"
            raise InputError(f"servers[{i}].kv_capacity_blocks", capacity,
                             f"below the largest request ({largest} blocks of {block} tokens, prompt and output){derived}: it could never run")
    if spec.solve.objective == "ttft_excess" and spec.slo.ttft_ms is None:
        raise InputError("solve.objective", "ttft_excess", "needs slo.ttft_ms")
    source = f"trace {spec.workload.trace.file}" if spec.workload.trace is not None else "shared-prefix generator"
    problem = PlacementProblem(spec.name, spec.description, engines, block, requests, total_blocks, spec.slo, spec.solve,
                               _policies(spec), spec.workload.seed, source, spec)
    for i, entry in enumerate(problem.policies):
        make_policy(problem, entry.name, entry.params, f"policies[{i}]")  # unknown names and parameters fail here
    return problem
