"""Where a dataset's files are on this machine, and the files an instance's ``dataset:NAME[/PART]`` names.

A shipped dataset's files sit in its folder beside this module.  A fetched one's sit in
``<cache>/datasets/<folder>/`` (:func:`optfleet.cache.cache_root`), put there only by ``optfleet data fetch``
once their sha256 matched (:mod:`optfleet.datasets.fetch`), so a file found there is taken as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from optfleet.cache import cache_root
from optfleet.datasets.registry import DATASETS, DataFile, Dataset, files_of
from optfleet.errors import InputError

DATASET_PREFIX = "dataset:"
"""How an instance field names a dataset instead of a path: ``dataset:NAME`` or ``dataset:NAME/PART``."""

SHIPPED_ROOT = Path(__file__).resolve().parent

Status = Literal["shipped", "cached", "not fetched", "sha256 unknown"]


def datasets_cache() -> Path:
    """The cache folder of fetched datasets (not created here)."""
    return cache_root() / "datasets"


def local_path(dataset: Dataset, file: DataFile) -> Path:
    """Where ``file`` is (shipped) or would be (fetched) on this machine."""
    return (SHIPPED_ROOT if dataset.shipped else datasets_cache()) / dataset.folder / file.file_name


def status(dataset: Dataset, file: DataFile) -> Status:
    """``shipped``; ``cached`` (fetched and checked); ``not fetched``; or ``sha256 unknown`` (cannot be fetched)."""
    if dataset.shipped:
        return "shipped"
    if local_path(dataset, file).is_file():
        return "cached"
    return "not fetched" if file.sha256 is not None else "sha256 unknown"


def listing() -> list[dict[str, Any]]:
    """Every registered dataset: its facts, and each file with its sha256, URL, path and status on this machine."""
    return [{"name": d.name, "title": d.title, "licence": d.licence, "source_url": d.source_url, "citation": d.citation,
             "shipped": d.shipped,
             "files": [{"part": f.part, "file": f.file_name, "size_bytes": f.size_bytes, "sha256": f.sha256, "url": f.url,
                        "status": status(d, f), "path": str(local_path(d, f))} for f in d.files]}
            for d in DATASETS.values()]


def is_reference(name: object) -> bool:
    """Whether an instance's file field names a dataset (``dataset:...``) rather than a path."""
    return isinstance(name, str) and name.startswith(DATASET_PREFIX)


def reference_files(text: str, field: str, one: bool = False) -> list[tuple[str, Path]]:
    """``(dataset:NAME/PART, path)`` for each file ``text`` (``dataset:NAME[/PART]``) names, every one on this
    machine; else an InputError naming ``field`` that says how to get it (the exact ``optfleet data fetch``).
    With ``one``, the field takes one file: a dataset of several is refused, naming its first part."""
    reference = text.removeprefix(DATASET_PREFIX)
    found, files = files_of(reference, field)
    if one and len(files) != 1:
        raise InputError(field, text, f"names the {len(files)} files of {found.name} and this field takes one: "
                                      f"name a part, e.g. {DATASET_PREFIX}{found.name}/{files[0].part}")
    named = []
    for file in files:
        path = local_path(found, file)
        if not path.is_file():
            raise InputError(field, text, _missing(found, file, reference if all(f.sha256 for f in files) else f"{found.name}/{file.part}"))
        named.append((f"{DATASET_PREFIX}{found.name}/{file.part}", path))
    return named


def _missing(dataset: Dataset, file: DataFile, fetchable: str) -> str:
    """Why ``file`` is not on this machine and what to do about it."""
    where = local_path(dataset, file)
    if dataset.shipped:
        return f"the shipped file {where} is missing from this installation of optfleet: reinstall it"
    if file.sha256 is None:
        return (f"{dataset.name}/{file.part} is not on this machine, and optfleet does not fetch it (its sha256 is not "
                f"recorded, so a download could not be checked): download {file.url} yourself and give its path instead")
    return f"dataset {dataset.name} is not in the cache ({where.parent}): run `optfleet data fetch {fetchable}`"
