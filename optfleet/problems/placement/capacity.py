"""The multi-turn cache-capacity check of the llm-d predicted-latency blog's appendix ("Theoretical Capacity
Estimates"): what share of the system prompts and of the users' histories fit in the cluster's KV cache, with
system prompts pinned first and perfect balancing.

    capacity  = pods x blocks per pod x block tokens                      (10 x 32,000 x 16 = 5,120,000)
    sys       = groups x system prompt tokens
    user      = groups x users per group x (question + output tokens) x rounds   (rounds = 4 for 5-turn sessions)
    sys fit   = min(1, capacity / sys)
    user fit  = min(1, max(0, capacity - sys) / user)

``optfleet validate`` prints it for an instance's workload twice: with the blog's cluster (10 pods x 32,000
blocks of 16 tokens, 4 rounds) and with the instance's own servers (``max_turns - 1`` rounds).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from optfleet.problems.placement.problem import PlacementProblem

BLOG_PODS, BLOG_BLOCKS_PER_POD, BLOG_BLOCK_TOKENS, BLOG_ROUNDS = 10, 32_000, 16, 4


def capacity_row(groups: int, users_per_group: int, system_tokens: int, question_tokens: int, output_tokens: int, *,
                 rounds: int = BLOG_ROUNDS, capacity_tokens: int = BLOG_PODS * BLOG_BLOCKS_PER_POD * BLOG_BLOCK_TOKENS) -> dict[str, Any]:
    """One row of the appendix's table (module docstring)."""
    sys_tokens = groups * system_tokens
    user_tokens = groups * users_per_group * (question_tokens + output_tokens) * rounds
    return {
        "groups": groups, "users_per_group": users_per_group, "system_prompt_tokens": system_tokens, "user_prompt_tokens": question_tokens,
        "output_tokens": output_tokens, "rounds": rounds, "unique_sys_tokens": sys_tokens, "unique_user_tokens": user_tokens,
        "capacity_tokens": capacity_tokens,
        "sys_fit_pct": 100.0 * min(1.0, capacity_tokens / sys_tokens) if sys_tokens else 100.0,
        "user_fit_pct": 100.0 * min(1.0, max(0, capacity_tokens - sys_tokens) / user_tokens) if user_tokens else 100.0,
    }


def capacity_rows(problem: "PlacementProblem") -> dict[str, Any] | None:
    """The check for an instance's shared-prefix workload: with the blog's cluster and with its own servers (their KV
    blocks as given or derived from their GPUs' memory)."""
    w = problem.spec.workload.shared_prefix
    if w is None:
        return None
    shape = (w.num_groups, w.num_prompts_per_group, w.system_prompt_len, w.question_len, w.output_len)
    own = sum(e.kv_capacity_blocks for e in problem.engines) * problem.block_tokens
    return {"blog_cluster": capacity_row(*shape),
            "instance_servers": capacity_row(*shape, rounds=max(1, w.max_turns - 1), capacity_tokens=own)}
