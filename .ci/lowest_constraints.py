"""Print a pip constraints file that pins every dependency of optfleet (and of the extras named) at its declared
lower bound, read from pyproject.toml: the lowest versions optfleet claims to support, so CI can test them."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

LOWER_BOUND = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(?:\[[^\]]*\])?\s*>=\s*([0-9][0-9A-Za-z.]*)")


def lower_bounds(pyproject: Path, extras: list[str], build: bool = True) -> list[str]:
    """``name==lower`` for every requirement of the project, of the ``extras`` and (with ``build``) of its build
    backend (pip applies a constraints file named by ``PIP_CONSTRAINT`` inside the build environment too)."""
    document = tomllib.loads(pyproject.read_text())
    project = document["project"]
    requirements = list(project["dependencies"]) + (list(document["build-system"]["requires"]) if build else [])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    pins = []
    for requirement in requirements:
        if requirement.startswith(f"{project['name']}["):  # an extra that pulls in other extras
            extra_names = requirement[len(project["name"]) + 1:requirement.index("]")].split(",")
            pins += lower_bounds(pyproject, [name.strip() for name in extra_names], build=False)
            continue
        match = LOWER_BOUND.match(requirement)
        if match is None:
            sys.exit(f"{requirement!r} declares no lower bound (>=): every dependency needs one that CI tests")
        pins.append(f"{match.group(1)}=={match.group(2)}")
    return sorted(set(pins))


if __name__ == "__main__":
    root = Path(__file__).resolve().parent.parent
    arguments = [a for a in sys.argv[1:] if a != "--no-build"]
    print("\n".join(lower_bounds(root / "pyproject.toml", arguments, build="--no-build" not in sys.argv[1:])))
