"""Sphinx extension: write the generated reference pages before Sphinx reads the sources.

* ``reference/instance-files/<kind>.md``: every field of every kind's schema (optfleet/instance/reference.py);
* ``reference/cli.md``: every command and option (optfleet/cli/reference.py).

They are written into the source tree (git-ignored), so every build regenerates them from the code.
"""

from __future__ import annotations

from pathlib import Path

from sphinx.application import Sphinx

from optfleet.cli.reference import cli_reference
from optfleet.instance.reference import kind_reference
from optfleet.registry import KINDS, kind


def write_reference(app: Sphinx) -> None:
    root = Path(app.srcdir) / "reference"
    fields = root / "instance-files"
    fields.mkdir(parents=True, exist_ok=True)
    for name in KINDS:
        _write(fields / f"{name}.md", kind_reference(name, kind(name).schema))
    _write(root / "cli.md", cli_reference())


def _write(path: Path, text: str) -> None:
    """Write only when the text changed, so Sphinx does not rebuild unchanged pages."""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def setup(app: Sphinx) -> dict[str, bool]:
    app.connect("builder-inited", write_reference)
    return {"parallel_read_safe": True}
