"""Readable renderings of results (tables for people; JSON lives beside each result type)."""
