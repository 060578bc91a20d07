"""The documentation's promises: every instance field and every command option is in the generated reference,
every benchmark results file is on the benchmarks page, and the getting-started pages work when followed literally."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest

from optfleet.cli import build_parser, main
from optfleet.cli.reference import cli_reference, commands, option_names
from optfleet.instance.reference import blocks, kind_reference
from optfleet.registry import KINDS, kind

from support import DOCS, REPO


def _json_schema_paths(schema: dict[str, Any], node: dict[str, Any], path: str) -> set[str]:
    """Every field path of a pydantic JSON schema, walked independently of optfleet.instance.reference: properties,
    ``$ref``, ``anyOf``/``oneOf`` members, list items (``[]``) and mapping values (``{}``)."""
    if "$ref" in node:
        return _json_schema_paths(schema, schema["$defs"][node["$ref"].rsplit("/", 1)[1]], path)
    found: set[str] = set()
    for member in node.get("anyOf", []) + node.get("oneOf", []):
        found |= _json_schema_paths(schema, member, path)
    if node.get("type") == "array" and isinstance(node.get("items"), dict):
        found |= _json_schema_paths(schema, node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        found |= _json_schema_paths(schema, node["additionalProperties"], f"{path}{{}}")
    for name, child in node.get("properties", {}).items():
        child_path = f"{path}.{name}" if path else name
        found.add(child_path)
        found |= _json_schema_paths(schema, child, child_path)
    return found


@pytest.mark.parametrize("name", list(KINDS))
def test_every_field_of_every_schema_is_in_the_reference(name):
    """The reference names each field by its path; a member of a block of a union adds its tag (``constraints[]
    (kind: fixed).instances``), which the JSON schema writes without, so tags are dropped before comparing."""
    schema = kind(name).schema
    named = {re.sub(r" \([^()]*\)", "", path) for path in re.findall(r"^\| `([^`]+)` \|", kind_reference(name, schema), flags=re.M)}
    expected = _json_schema_paths(schema.model_json_schema(), schema.model_json_schema(), "")
    assert expected and expected <= named, sorted(expected - named)


@pytest.mark.parametrize("name", list(KINDS))
def test_every_field_of_every_schema_has_a_meaning(name):
    """Issue 35: every row of the reference says what its field means (the string under the field in its schema
    class, a comment on its line, or a bullet of the class docstring)."""
    rows = [(f"{b.path}{'.' if b.path else ''}{row.name}", row.meaning)
            for b in blocks(kind(name).schema) for row in b.rows]
    without = [path for path, meaning in rows if not meaning.strip()]
    assert rows and not without, without


def test_every_command_and_option_is_in_the_cli_reference():
    reference = cli_reference()
    listed = list(commands(build_parser()))
    assert len(listed) >= 8
    for name, command in listed:
        assert f"## `optfleet {name}`" in reference
        for option in option_names(command):
            assert f"`{option}" in reference, (name, option)


def test_the_benchmarks_page_includes_every_results_table():
    page = (DOCS / "project" / "benchmarks.md").read_text()
    for results in sorted((REPO / "benchmarks" / "results").glob("*.md")):
        assert f"```{{include}} ../../benchmarks/results/{results.name}" in page, results.name


TUTORIAL = ("first-instance.md", "first-gap.md", "first-constraint.md")
FILE_BLOCK = re.compile(r"```\{code-block\} yaml\n:caption: (?P<name>\S+)\n\n(?P<text>.*?)```", re.S)
CONSOLE_BLOCK = re.compile(r"```console\n(?P<text>.*?)```", re.S)
PYTHON_BLOCK = re.compile(r"```python\n(?P<text>.*?)```", re.S)
CUT = "…"  # a quoted output's line that marks lines left out


@pytest.mark.solved
def test_the_getting_started_pages_work_when_followed_literally(tmp_path, monkeypatch, capsys):
    """Each page in order, in one folder: every file it shows is written as shown, every command and Python block it
    shows runs, and every line of output it quotes is in the command's output (``…`` marks lines left out)."""
    monkeypatch.chdir(tmp_path)
    ran = 0
    for page in TUTORIAL:
        text = (DOCS / "getting-started" / page).read_text()
        steps = sorted([*((m.start(), "file", m) for m in FILE_BLOCK.finditer(text)), *((m.start(), "console", m) for m in CONSOLE_BLOCK.finditer(text)),
                        *((m.start(), "python", m) for m in PYTHON_BLOCK.finditer(text))], key=lambda step: step[0])
        for _, kind_of_step, match in steps:
            if kind_of_step == "file":
                (tmp_path / match["name"]).write_text(match["text"])
                continue
            if kind_of_step == "python":
                exec(compile(match["text"], page, "exec"), {})
                capsys.readouterr()
                continue
            lines = match["text"].rstrip("\n").splitlines()
            command, quoted = lines[0], lines[1:]
            assert command.startswith("$ optfleet "), command
            main(shlex.split(command[2:])[1:])
            captured = capsys.readouterr()
            for line in quoted:
                assert line.strip() == CUT or line in captured.out + captured.err, (page, command, line)
            ran += 1
    assert ran == 5


GUIDES = ("capacity-plan.md", "prefix-cache.md", "explain.md", "pd-fleet.md")
SECONDS = re.compile(r"(?<![\d.,])\d+\.\d{3}(?![\d.])")  # a "time s" cell (3 decimals): it varies from run to run


@pytest.mark.solved
@pytest.mark.parametrize("page", GUIDES)
def test_the_guides_commands_run_and_print_what_they_quote(page, tmp_path, monkeypatch, capsys):
    """Every ``$ optfleet`` line of a guide's console blocks runs from a folder holding the shipped ``instances/``
    and exits 0, and each run of lines it quotes between ``…`` marks is printed as one run, in that order (a quoted
    table that silently leaves out a row fails); every Python block runs."""
    (tmp_path / "instances").symlink_to(REPO / "instances")
    monkeypatch.chdir(tmp_path)
    text = (DOCS / "guide" / page).read_text()
    runs: list[tuple[str, list[str]]] = []
    for block in CONSOLE_BLOCK.finditer(text):
        for line in block["text"].rstrip("\n").splitlines():
            if line.startswith("$ "):
                runs.append((line[2:], []))
            else:
                assert runs, (page, line)
                runs[-1][1].append(line)
    assert runs, page
    for block in PYTHON_BLOCK.finditer(text):
        exec(compile(block["text"], page, "exec"), {})
    for command, quoted in runs:
        assert command.startswith("optfleet "), (page, command)
        assert main(shlex.split(command)[1:]) == 0, (page, command)
        captured = capsys.readouterr()
        printed = SECONDS.sub("0.000", captured.out + captured.err)
        for chunk in (SECONDS.sub("0.000", c.strip("\n")) for c in "\n".join(quoted).split(CUT)):
            assert not chunk or chunk in printed, (page, command, chunk)
