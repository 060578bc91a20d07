"""Prefix-tree (radix) KV caching: block-hash traces, the engines' eviction policies and the hindsight optimum."""
