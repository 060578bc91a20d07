"""Datasets by name (optfleet.datasets, ``optfleet data``): the registry, the shipped Azure 2023 trace, fetching
from a loopback HTTP server (tests never touch the network), and instances that name a dataset."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

import optfleet
from optfleet.cli import main
from optfleet.datasets import registry
from optfleet.datasets.fetch import fetch
from optfleet.datasets.registry import DATASETS, DataFile, Dataset
from optfleet.datasets.store import SHIPPED_ROOT, local_path
from optfleet.errors import EXIT_BAD_INPUT, InputError
from optfleet.instance import load_instance
from optfleet.problems.fleet.problem import prepare

from support import REPO, SHARED_DATA, needs_shared_data

AZURE_2023 = DATASETS["azure-llm-2023"]
FLEET_TRACE = REPO / "instances" / "fleet" / "azure_2023_trace.yaml"
RESERVED_TRACE = REPO / "instances" / "reserved" / "azure_2023_flash.yaml"
FIXTURE = "loopback-trace"  # the dataset the loopback server serves (registered by the `served` fixture)


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------- a loopback server (tests/conftest.py: empty_cache, offline)


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves a folder's files; counts the GET requests on its server; logs nothing."""

    def do_GET(self) -> None:
        self.server.gets += 1  # type: ignore[attr-defined]
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


class Served:
    """A loopback HTTP server over a folder, with the fixture dataset registered at its URL."""

    def __init__(self, folder: Path, httpd: http.server.ThreadingHTTPServer, content: bytes) -> None:
        self.folder, self.httpd, self.content = folder, httpd, content
        self.url = f"http://127.0.0.1:{httpd.server_address[1]}/AzureLLMInferenceTrace_code.csv"

    @property
    def gets(self) -> int:
        return self.httpd.gets  # type: ignore[attr-defined]

    def serve(self, data: bytes) -> None:
        (self.folder / "AzureLLMInferenceTrace_code.csv").write_bytes(data)


@pytest.fixture
def served(tmp_path: Path, empty_cache: Path, offline: list[object], monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    """The first 300 requests of the shipped code trace, served on 127.0.0.1 and registered as the fetched
    dataset ``loopback-trace`` (part ``code``) with their sha256 and size."""
    content = b"".join(local_path(AZURE_2023, AZURE_2023.files[0]).read_bytes().splitlines(keepends=True)[:301])
    folder = tmp_path / "served"
    folder.mkdir()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(folder)))
    httpd.gets = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)  # shutdown() waits up to one poll
    thread.start()
    server = Served(folder, httpd, content)
    server.serve(content)
    monkeypatch.setitem(registry.DATASETS, FIXTURE, Dataset(
        name=FIXTURE, title="test fixture: 300 requests of the Azure 2023 code trace", licence="CC-BY-4.0",
        source_url=server.url, citation="Patel et al., ISCA 2024", shipped=False, folder="loopback_trace",
        files=(DataFile("code", "AzureLLMInferenceTrace_code.csv", server.url, sha256_of(content), len(content)),)))
    yield server
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


# ---------------------------------------------------------------- the registry and the shipped trace


@pytest.mark.unit
def test_registry_facts_are_well_formed():
    assert {"azure-llm-2023", "azure-llm-2024", "mooncake-fast25", "qwen-bailian", "burstgpt"} <= set(DATASETS)
    assert len({d.folder for d in DATASETS.values()}) == len(DATASETS)
    for dataset in DATASETS.values():
        assert dataset.licence in ("CC-BY-4.0", "Apache-2.0") or (dataset.licence == "none stated" and not dataset.shipped)
        assert dataset.source_url.startswith("https://") and dataset.citation
        assert len({f.part for f in dataset.files}) == len(dataset.files) and "/" not in "".join(f.part for f in dataset.files)
        for file in dataset.files:
            assert file.url.startswith("https://") and file.url.endswith("/" + file.file_name)
            assert file.sha256 is None or (len(file.sha256) == 64 and set(file.sha256) <= set("0123456789abcdef"))
            assert (file.sha256 is None) == (file.size_bytes is None) and (file.size_bytes is None or file.size_bytes > 0)
        assert dataset.shipped == (dataset.name == "azure-llm-2023")


@pytest.mark.unit
def test_the_shipped_trace_matches_its_recorded_sha256_and_names_its_source_and_licence():
    folder = SHIPPED_ROOT / AZURE_2023.folder
    readme = (folder / "README.md").read_text()
    for file in AZURE_2023.files:
        data = (folder / file.file_name).read_bytes()
        assert (sha256_of(data), len(data)) == (file.sha256, file.size_bytes)
        assert file.sha256 in readme and f"{file.size_bytes:,}" in readme
    assert "CC BY 4.0" in readme and "Splitwise" in readme and "ISCA 2024" in readme and "github.com/Azure/AzurePublicDataset" in readme
    assert (folder / "LICENSE").read_text(encoding="utf-8-sig").startswith("Attribution 4.0 International")
    counts = [len((folder / f.file_name).read_text().splitlines()) - 1 for f in AZURE_2023.files]
    assert counts == [8_819, 19_366]


@needs_shared_data
@pytest.mark.unit
def test_the_shipped_trace_is_byte_for_byte_the_teams_copy():
    for file in AZURE_2023.files:
        assert local_path(AZURE_2023, file).read_bytes() == (SHARED_DATA / "azure_llm_2023" / file.file_name).read_bytes()


# ---------------------------------------------------------------- optfleet data list / fetch


@pytest.mark.unit
def test_data_list_shows_shipped_not_fetched_and_unknown_hashes(empty_cache, capsys):
    code, out, _ = run(["data", "list", "--json"], capsys)
    body = json.loads(out)
    assert code == 0 and body["cache_dir"] == str(empty_cache / "datasets")
    status = {(d["name"], f["part"]): f["status"] for d in body["datasets"] for f in d["files"]}
    assert status[("azure-llm-2023", "code")] == status[("azure-llm-2023", "conv")] == "shipped"
    assert status[("mooncake-fast25", "conversation")] == "not fetched"
    assert status[("mooncake-fast25", "toolagent")] == status[("burstgpt", "1")] == "sha256 unknown"
    code, out, _ = run(["data", "list"], capsys)
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 120
    row = next(line for line in out.splitlines() if "AzureLLMInferenceTrace_conv.csv" in line)
    assert row.split()[:2] == ["azure-llm-2023", "conv"] and row.split()[-1] == "shipped" and "CC-BY-4.0" in row


def test_fetch_downloads_into_the_cache_and_checks_the_sha256(served, empty_cache, capsys):
    code, out, _ = run(["data", "list", "--json"], capsys)
    listed = next(d for d in json.loads(out)["datasets"] if d["name"] == FIXTURE)
    assert listed["files"][0]["status"] == "not fetched"
    code, out, err = run(["data", "fetch", FIXTURE, "--json"], capsys)
    assert code == 0, err
    (file,) = json.loads(out)["files"]
    path = empty_cache / "datasets" / "loopback_trace" / "AzureLLMInferenceTrace_code.csv"
    assert file["action"] == "downloaded" and file["path"] == str(path) and file["size_bytes"] == len(served.content)
    assert path.read_bytes() == served.content and file["sha256"] == sha256_of(served.content)
    assert files_under(empty_cache) == [path]  # no temporary file left beside it
    code, out, _ = run(["data", "list"], capsys)
    assert next(line for line in out.splitlines() if line.split()[0] == FIXTURE).split()[-1] == "cached"
    gets = served.gets
    code, out, _ = run(["data", "fetch", f"{FIXTURE}/code"], capsys)
    assert code == 0 and "already in the cache, sha256 checked" in out and served.gets == gets  # not downloaded again


def test_fetch_reports_its_progress_in_kb(served, empty_cache):
    heard: list[tuple[str, float, float]] = []
    (fetched,) = fetch(FIXTURE, progress=lambda label, done, total: heard.append((label, done, total)))
    assert fetched.action == "downloaded"
    assert heard[-1] == ("done", len(served.content) / 1000, len(served.content) / 1000)
    assert all(done <= total for _, done, total in heard) and any(label == f"{FIXTURE}/code" for label, _, _ in heard)


def test_a_corrupted_download_is_refused_on_its_sha256_and_nothing_is_kept(served, empty_cache, capsys):
    corrupted = bytearray(served.content)
    corrupted[100] ^= 1  # one bit flipped
    served.serve(bytes(corrupted))
    code, out, err = run(["data", "fetch", FIXTURE], capsys)
    assert code == EXIT_BAD_INPUT and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"error: NAME = '{FIXTURE}': refused the download of code")
    assert "sha256" in err and sha256_of(bytes(corrupted)) in err and "nothing was kept" in err
    assert files_under(empty_cache) == [] and not (empty_cache / "datasets" / "loopback_trace").exists()
    with pytest.raises(InputError, match="optfleet data fetch loopback-trace"):  # still missing, and said so
        prepare(load_instance(_fleet_document(f"dataset:{FIXTURE}")))


def test_a_damaged_cached_file_is_downloaded_again(served, empty_cache, capsys):
    assert run(["data", "fetch", FIXTURE], capsys)[0] == 0
    path = empty_cache / "datasets" / "loopback_trace" / "AzureLLMInferenceTrace_code.csv"
    path.write_bytes(b"TIMESTAMP,ContextTokens,GeneratedTokens\n")
    code, out, _ = run(["data", "fetch", FIXTURE], capsys)
    assert code == 0 and "downloaded, sha256 checked" in out and path.read_bytes() == served.content


def test_a_failed_connection_is_one_error_line_and_leaves_nothing(served, empty_cache, capsys):
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dead = f"http://127.0.0.1:{port}/AzureLLMInferenceTrace_code.csv"
    (file,) = registry.DATASETS[FIXTURE].files
    registry.DATASETS[FIXTURE] = Dataset(**{**vars(registry.DATASETS[FIXTURE]), "files": (DataFile(**{**vars(file), "url": dead}),)})
    code, out, err = run(["data", "fetch", FIXTURE], capsys)
    assert code == EXIT_BAD_INPUT and len(err.splitlines()) == 1 and f"cannot download code from {dead}" in err
    assert files_under(empty_cache) == []


def test_a_cache_that_cannot_be_written_is_one_error_line(served, tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("OPTFLEET_CACHE_DIR", str(blocker / "cache"))
    code, _, err = run(["data", "fetch", FIXTURE], capsys)
    assert code == EXIT_BAD_INPUT and len(err.splitlines()) == 1
    assert f"cannot write code into {blocker / 'cache' / 'datasets' / 'loopback_trace'}" in err and served.gets == 0


@pytest.mark.parametrize(("name", "message"), [
    ("burstgpt", "the sha256 of 1, 2, 1-without-fails, 2-without-fails is not recorded: download "
                 "https://github.com/HPMLL/BurstGPT/releases/download/v1.1/BurstGPT_1.csv"),
    ("mooncake-fast25", "the others can be fetched one by one: optfleet data fetch mooncake-fast25/conversation"),
    ("no-such-data", "unknown dataset; known: azure-llm-2023"),
    ("qwen-bailian/trace-c", "dataset qwen-bailian has no part 'trace-c'; its parts: trace-a, trace-b, thinking, coder"),
])
def test_bad_names_and_unknown_hashes_exit_2_with_one_line_and_no_download(name, message, empty_cache, offline, capsys):
    code, out, err = run(["data", "fetch", name], capsys)
    assert code == EXIT_BAD_INPUT and out == "" and len(err.splitlines()) == 1
    assert err.startswith(f"error: NAME = '{name}': ") and message in err
    assert files_under(empty_cache) == []


def test_fetching_the_shipped_dataset_downloads_nothing(empty_cache, offline, capsys):
    code, out, _ = run(["data", "fetch", "azure-llm-2023", "--json"], capsys)
    files = json.loads(out)["files"]
    assert code == 0 and [f["action"] for f in files] == ["shipped", "shipped"]
    assert [f["path"] for f in files] == [str(local_path(AZURE_2023, f)) for f in AZURE_2023.files]
    assert files_under(empty_cache) == []


def test_fetch_without_pooch_says_which_extra(served, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pooch", None)  # import pooch raises ImportError
    code, _, err = run(["data", "fetch", FIXTURE], capsys)
    assert code == EXIT_BAD_INPUT and "needs pooch: pip install 'optfleet[datasets]'" in err


# ---------------------------------------------------------------- instances that name a dataset


def _fleet_document(trace_file: object) -> dict:
    document = yaml.safe_load(FLEET_TRACE.read_text())
    document["workload"]["lengths"]["trace_file"] = trace_file
    return document


@pytest.mark.solved
def test_the_shipped_trace_instances_solve_offline(empty_cache, offline):
    reserved = optfleet.solve(RESERVED_TRACE, "percentile_p99").to_dict()
    (row,) = reserved["results"]
    assert row["feasible"] and row["units"] == 32  # as in test_reserved.py's pins
    problem = optfleet.load(RESERVED_TRACE).problem
    assert len(problem.trace) == 28_185 and problem.trace.class_names == ("code", "conv")
    fleet = optfleet.solve(FLEET_TRACE, "sweep").to_dict()
    assert fleet["results"][0]["feasible"] and files_under(empty_cache) == []


@needs_shared_data
@pytest.mark.unit
def test_the_dataset_gives_the_same_requests_as_the_files_it_names():
    by_name = prepare(load_instance(FLEET_TRACE)).mix
    files = [str(SHARED_DATA / "azure_llm_2023" / f.file_name) for f in AZURE_2023.files]
    by_path = prepare(load_instance(FLEET_TRACE, workload__lengths__trace_file=files)).mix
    parts = [f"dataset:azure-llm-2023/{f.part}" for f in AZURE_2023.files]
    by_parts = prepare(load_instance(FLEET_TRACE, workload__lengths__trace_file=parts)).mix
    for mix in (by_path, by_parts):
        assert np.array_equal(mix.l_in, by_name.l_in) and np.array_equal(mix.l_out, by_name.l_out)
        assert np.array_equal(mix.prob, by_name.prob)


@pytest.mark.parametrize(("reference", "command"), [
    ("dataset:mooncake-fast25/conversation", "optfleet data fetch mooncake-fast25/conversation"),
    ("dataset:qwen-bailian", "optfleet data fetch qwen-bailian/trace-a"),
])
def test_an_instance_naming_a_dataset_not_fetched_gives_the_fetch_command(reference, command, empty_cache, offline, tmp_path, capsys):
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(_fleet_document(reference)))
    code, out, err = run(["validate", str(path)], capsys)
    assert code == EXIT_BAD_INPUT and out == "" and len(err.splitlines()) == 1
    assert err.startswith(f"error: workload.lengths.trace_file = '{reference}': ")
    if reference.endswith("conversation"):
        assert f"is not in the cache ({empty_cache / 'datasets' / 'mooncake_fast25'}): run `{command}`" in err
    else:  # its first part's sha256 is not recorded: optfleet will not fetch it
        assert "qwen-bailian/trace-a is not on this machine, and optfleet does not fetch it" in err and "yourself" in err


def test_an_instance_naming_a_fetched_dataset_solves(served, empty_cache, tmp_path, capsys):
    document = yaml.safe_load(RESERVED_TRACE.read_text())
    document["trace"]["file"] = f"dataset:{FIXTURE}"
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(document))
    code, _, err = run(["validate", str(path)], capsys)
    assert code == EXIT_BAD_INPUT and f"run `optfleet data fetch {FIXTURE}`" in err
    assert run(["data", "fetch", FIXTURE, "--quiet"], capsys)[0] == 0
    problem = optfleet.load(path).problem
    assert len(problem.trace) == 300 and problem.trace.class_names == ("code",)
    code, out, _ = run(["solve", str(path), "--method", "overload_scan_p95", "--json", "--quiet"], capsys)
    assert code == 0 and json.loads(out)["results"][0]["feasible"]


@pytest.mark.unit
def test_a_field_that_takes_one_file_refuses_a_dataset_of_several():
    document = _fleet_document(None)
    del document["workload"]["lengths"]["trace_file"]
    document["workload"]["lengths"]["cdf_file"] = "dataset:azure-llm-2023"
    document["workload"]["split"] = {"rule": "fixed_output_fraction"}
    with pytest.raises(InputError, match="names the 2 files of azure-llm-2023 and this field takes one: name a part, "
                                         "e.g. dataset:azure-llm-2023/code"):
        prepare(load_instance(document))
