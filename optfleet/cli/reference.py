"""The command-line reference, generated from the parser: every command with its usage, its description and a
table of its arguments (flag, value, default, help).  The documentation renders :func:`cli_reference`; a test
checks that every option of every command appears in it."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from optfleet.cli import build_parser


def commands(parser: argparse.ArgumentParser | None = None) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``(name, parser)`` of every command, in the order ``optfleet --help`` lists them."""
    parser = parser or build_parser()
    for action in parser._actions:  # argparse keeps its subcommands here; there is no public accessor
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def option_names(command: argparse.ArgumentParser) -> list[str]:
    """Every flag (``--time-limit``) and positional (``file``) of one command, ``--help`` aside."""
    names = []
    for action in command._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        names.append(max(action.option_strings, key=len) if action.option_strings else action.dest)
    return names


def cli_reference() -> str:
    """The Markdown reference of every command (module docstring)."""
    parser = build_parser()
    lines = ["# Command line", "", f"`{parser.prog}`: {parser.description}", "", parser.epilog or "", ""]
    for name, command in commands(parser):
        usage = " ".join(command.format_usage().split())
        lines += [f"## `optfleet {name}`", "", command.description or "", "", "```text", usage.removeprefix("usage: "), "```", "",
                  "| argument | value | default | what it does |", "|---|---|---|---|"]
        for action in command._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            flag = ", ".join(action.option_strings) if action.option_strings else action.dest
            takes = "" if action.nargs == 0 else (action.metavar or (action.dest.upper() if action.option_strings else ""))
            default = "" if action.default in (None, False, [], argparse.SUPPRESS) else f"`{action.default}`"
            choices = f" (one of {', '.join(map(str, action.choices))})" if action.choices else ""
            text = ("required; " if action.required and action.option_strings else "") + (action.help or "").replace("%%", "%").replace("|", "\\|") + choices
            lines.append(f"| `{flag}` | {takes} | {default} | {text} |")
        lines.append("")
    return "\n".join(lines)
