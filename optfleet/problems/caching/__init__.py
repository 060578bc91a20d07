"""Tail-optimal prompt caching: conversation traces, one schedule evaluator, policies."""

from optfleet.problems.caching.evaluate import CacheEvaluation, TtftModel, evaluate_schedule, occupancy_tokens
from optfleet.problems.caching.trace import ConversationTrace, build_trace

__all__ = ["CacheEvaluation", "ConversationTrace", "TtftModel", "build_trace", "evaluate_schedule", "occupancy_tokens"]
