"""The public datasets optfleet knows by name: their files, checksums, sizes, licences and sources.

A dataset is a few files (its *parts*); an instance names one as ``dataset:NAME`` (every part, in the order
below) or ``dataset:NAME/PART``.  A dataset small enough and licensed for redistribution *ships* inside the
package (its folder beside this module, with its source and licence); the others are *fetched* by
``optfleet data fetch NAME`` into the user's cache, each file checked against its sha256.

The facts are in ``registry.yaml`` beside this module.  A sha256 is recorded only where it was established from
the publisher's bytes: computed from the file in the publisher's git repository at the commit the URL names, or
read from the publisher's Git LFS pointer (whose ``oid sha256`` is the file's sha256).  Where none could be
established the hash is ``None``: such a file is listed with its URL and licence, but optfleet will not download
what it cannot check.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from optfleet.errors import InputError


@dataclass(frozen=True)
class DataFile:
    """One file of a dataset: its part name, file name, download URL, sha256 (None: not known) and size."""

    part: str
    file_name: str
    url: str
    sha256: str | None
    size_bytes: int | None


@dataclass(frozen=True)
class Dataset:
    """A named dataset: where it comes from, under which licence, whom to cite, whether it ships, its files.

    ``folder`` is its folder name, beside this module when it ships and under the cache's ``datasets`` folder
    when fetched."""

    name: str
    title: str
    licence: str
    source_url: str
    citation: str
    shipped: bool
    folder: str
    files: tuple[DataFile, ...]

    def part(self, name: str, field: str) -> DataFile:
        """The file of part ``name``; an InputError naming ``field`` and the parts when there is none."""
        for file in self.files:
            if file.part == name:
                return file
        raise InputError(field, f"{self.name}/{name}", f"dataset {self.name} has no part {name!r}; its parts: "
                                                       + ", ".join(f.part for f in self.files))


REGISTRY_FILE = Path(__file__).with_name("registry.yaml")
"""The registry's facts, dataset by dataset, with how each sha256 was established (package data)."""


def read_registry() -> dict[str, Dataset]:
    """The datasets of :data:`REGISTRY_FILE`, by name (its keys are the fields of :class:`Dataset` and :class:`DataFile`)."""
    entries = yaml.safe_load(REGISTRY_FILE.read_text(encoding="utf-8"))
    return {name: Dataset(name=name, **{**entry, "files": tuple(DataFile(**file) for file in entry["files"])})
            for name, entry in entries.items()}


DATASETS: dict[str, Dataset] = read_registry()
"""Every dataset optfleet knows, by name."""


def dataset(name: str, field: str) -> Dataset:
    """The dataset called ``name``; an InputError naming ``field`` and the known names when there is none."""
    if name not in DATASETS:
        raise InputError(field, name, f"unknown dataset; known: {', '.join(DATASETS)} (optfleet data list shows them)")
    return DATASETS[name]


def files_of(reference: str, field: str) -> tuple[Dataset, tuple[DataFile, ...]]:
    """The dataset and files of ``NAME`` (every part) or ``NAME/PART`` (one); InputErrors name ``field``."""
    name, _, part = reference.partition("/")
    found = dataset(name, field)
    return found, (found.part(part, field),) if part else found.files
