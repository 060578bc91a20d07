"""``optfleet data fetch``: a dataset's files downloaded into the cache with pooch, each checked against its sha256.

pooch downloads a file to a temporary name in its cache folder and moves it to its own name only when its
sha256 is the registry's; a download that does not match is refused and nothing of it is kept (the temporary
file is deleted, and the folders this fetch created are removed again when they are left empty).  A file already
in the cache with the right sha256 is not downloaded again; one with another sha256 (damaged since) is deleted
and downloaded anew.  A file whose sha256 is not recorded is never downloaded (optfleet.datasets.registry).
pooch is the ``datasets`` extra: ``pip install 'optfleet[datasets]'``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from optfleet.datasets.registry import DataFile, Dataset, files_of
from optfleet.datasets.store import local_path
from optfleet.errors import InputError
from optfleet.progress import Progress, silent

if TYPE_CHECKING:
    from types import ModuleType

TIMEOUT_S = 60.0  # seconds without a byte from the server before a download is given up
BYTES_PER_KB = 1000


@dataclass(frozen=True)
class Fetched:
    """One file of a fetch: where it is, its size and sha256, and what the fetch did (``shipped``: nothing, it ships
    with optfleet; ``cached``: it was in the cache with the right sha256; ``downloaded``)."""

    dataset: str
    part: str
    path: Path
    size_bytes: int
    sha256: str | None
    action: Literal["shipped", "cached", "downloaded"]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "path": str(self.path)}


class DownloadError(InputError):
    """A download that failed, or was refused on its sha256: the dataset named could not be fetched (exit 2)."""


def fetch(reference: str, *, progress: Progress = silent, field: str = "NAME", timeout_s: float = TIMEOUT_S) -> list[Fetched]:
    """Fetch the files of ``reference`` (``NAME`` or ``NAME/PART``) into the cache (module docstring); errors name
    ``field``.  ``progress`` hears ``(part, kB done, kB in all)`` while files download."""
    found, files = files_of(reference, field)
    if found.shipped:
        return [Fetched(found.name, f.part, local_path(found, f), local_path(found, f).stat().st_size, f.sha256, "shipped")
                for f in files]
    unknown = [f for f in files if f.sha256 is None]
    if unknown:
        raise InputError(field, reference, _unchecked(found, files, unknown))
    pooch = _pooch(field, reference)
    total_bytes = sum(f.size_bytes or 0 for f in files)
    fetched: list[Fetched] = []
    for file in files:
        done_bytes = sum(f.size_bytes for f in fetched)
        bar = _ByteProgress(progress, f"{found.name}/{file.part}", done_bytes, total_bytes)
        fetched.append(_fetch_file(pooch, found, file, bar, field, reference, timeout_s))
    progress("done", total_bytes / BYTES_PER_KB, total_bytes / BYTES_PER_KB)
    return fetched


def _unchecked(found: Dataset, files: tuple[DataFile, ...], unknown: list[DataFile]) -> str:
    """Why files without a recorded sha256 are not fetched, and what to do instead."""
    known = [f for f in files if f.sha256 is not None]
    others = ("; the others can be fetched one by one: " + ", ".join(f"optfleet data fetch {found.name}/{f.part}" for f in known)
              if known else "")
    return (f"optfleet does not download what it cannot check, and the sha256 of {', '.join(f.part for f in unknown)} is not "
            f"recorded: download {', '.join(f.url for f in unknown)} yourself and name the file by its path{others}")


def _pooch(field: str, reference: str) -> "ModuleType":
    try:
        import pooch
    except ImportError:
        raise InputError(field, reference, "fetching datasets needs pooch: pip install 'optfleet[datasets]'") from None
    return pooch


def _fetch_file(pooch: "ModuleType", found: Dataset, file: DataFile, bar: "_ByteProgress", field: str, reference: str,
                timeout_s: float) -> Fetched:
    """One file into the cache: kept when already there with its sha256, else downloaded and checked."""
    import requests

    path = local_path(found, file)
    if path.is_file():
        if pooch.file_hash(str(path), alg="sha256") == file.sha256:
            return Fetched(found.name, file.part, path, path.stat().st_size, file.sha256, "cached")
        path.unlink()  # damaged since it was fetched: not what the registry names
    created = _missing_ancestors(path.parent)
    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel("WARNING")  # pooch announces each download on stderr; optfleet's progress display does
    try:
        pooch.retrieve(file.url, known_hash=f"sha256:{file.sha256}", fname=file.file_name, path=path.parent,
                       downloader=pooch.HTTPDownloader(progressbar=bar, timeout=timeout_s))
    except ValueError as exc:
        if "hash" not in str(exc):
            raise
        raise DownloadError(field, reference, f"refused the download of {file.part} from {file.url}: its sha256 is not the "
                                              f"recorded one ({str(exc).split('. ')[0]}); nothing was kept in the cache") from None
    except requests.RequestException as exc:  # before OSError: requests' errors are OSErrors too
        raise DownloadError(field, reference, f"cannot download {file.part} from {file.url}: {exc}") from None
    except OSError as exc:
        raise DownloadError(field, reference, f"cannot write {file.part} into {path.parent}: {exc.strerror or exc}") from None
    finally:
        logger.setLevel(level)
        if not path.is_file():
            _remove_if_empty(created)
    return Fetched(found.name, file.part, path, path.stat().st_size, file.sha256, "downloaded")


def _missing_ancestors(folder: Path) -> list[Path]:
    """``folder`` and its ancestors that do not exist yet, deepest first (a failed fetch removes them again)."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_if_empty(folders: list[Path]) -> None:
    """Remove each of ``folders`` (deepest first) that exists and is empty."""
    for folder in folders:
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


class _ByteProgress:
    """pooch's progress-bar interface (``total``, ``update``, ``reset``, ``close``), told to an optfleet Progress in
    kB over the whole fetch: this file's bytes after ``offset_bytes`` of ``total_bytes`` (registered sizes; pooch
    sets ``total`` to the server's length, used when the registry gives none)."""

    def __init__(self, progress: Progress, label: str, offset_bytes: int, total_bytes: int) -> None:
        self.progress, self.label = progress, label
        self.offset_bytes, self.total_bytes = offset_bytes, total_bytes
        self.total = 0  # set by pooch: the bytes the server announced for this file
        self.done_bytes = 0

    def _tell(self, done_bytes: int) -> None:
        total = self.total_bytes or self.total
        if total > 0:  # below the end until close(): pooch counts whole chunks, more than the last one holds
            self.progress(self.label, min(self.offset_bytes + done_bytes, 0.999 * total) / BYTES_PER_KB, total / BYTES_PER_KB)

    def update(self, n_bytes: int) -> None:
        self.done_bytes += n_bytes
        self._tell(self.done_bytes)

    def reset(self) -> None:
        self.done_bytes = 0

    def close(self) -> None:
        """Nothing to close: pooch calls this when the file is complete, and :func:`fetch` reports the end once
        every file is in."""
