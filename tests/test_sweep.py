"""Scenario studies (optfleet sweep / optfleet.sweep): swept values, validation, the tidy table, resumption, engines."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

import optfleet
from optfleet.cli import main
from optfleet.errors import InputError
from optfleet.studies.overrides import axis_values, parse_axis, scenarios
from optfleet.studies.table import KEY

from support import FLEET_INSTANCES

TOY = str(FLEET_INSTANCES / "toy.yaml")
METHODS = "sweep,homogeneous"


# --- swept values and scenarios (no solver) ---

@pytest.mark.unit
@pytest.mark.parametrize(("text", "values"), [
    ("100,1000,10000", [100, 1000, 10000]),
    ("200:1000:200", [200, 400, 600, 800, 1000]),
    ("0.1:0.5:0.1", [0.1, 0.2, 0.3, 0.4, 0.5]),  # decimal steps: the stop is reached, not 0.49999
    ("0:1:0.3", [0.0, 0.3, 0.6, 0.9]),  # the stop is off the grid: not included
    ("10:4:-3", [10, 7, 4]),
    ("paper, fleetsim_compatible", ["paper", "fleetsim_compatible"]),
    ("true,0.5,abc", [True, 0.5, "abc"]),
    ("[a.csv,b.csv],[c.csv]", [["a.csv", "b.csv"], ["c.csv"]]),  # commas inside a flow list do not split
    ("{2000: 4},'x,y'", [{2000: 4}, "x,y"]),
])
def test_axis_values(text, values):
    assert axis_values("f", text) == values


@pytest.mark.unit
@pytest.mark.parametrize("text", ["10:1:1", "1:10:0", "1,,2", "1,", "null", "[1,2", "0:1e6:0.5", "0:1e999999999:1e-999999999",
                                  "1e999999999:1e999999999:1"])
def test_bad_axis_values_name_the_field(text):
    with pytest.raises(InputError) as error:
        axis_values("workload.rate_rps", text)
    assert str(error.value).startswith(("workload.rate_rps", "--set"))


@pytest.mark.unit
@pytest.mark.parametrize("item", ["workload.rate_rps", "=1,2", "workload..rate_rps=1", "workload.rate_rps="])
def test_bad_set_items(item):
    with pytest.raises(InputError, match="--set"):
        parse_axis(item)


@pytest.mark.unit
def test_product_varies_the_first_field_slowest_and_zip_pairs():
    axes = {"a": [1, 2], "b": ["x", "y", "z"]}
    assert scenarios(axes) == [{"a": a, "b": b} for a in (1, 2) for b in ("x", "y", "z")]
    assert scenarios({"a": [1, 2], "b": ["x", "y"]}, zipped=True) == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    with pytest.raises(InputError, match="one length"):
        scenarios(axes, zipped=True)


@pytest.mark.unit
@pytest.mark.parametrize(("argv", "named"), [
    (["--set", "workload.rate_rp=1,2"], "workload.rate_rp = 1: Extra inputs are not permitted (in scenario 0 (workload.rate_rp=1))"),
    (["--set", "workload.rate_rps=5,0"], "workload.rate_rps = 0: Input should be greater than 0 (in scenario 1 (workload.rate_rps=0))"),
    (["--set", "workload.rate_rps=1", "--set", "slo.rho_max=0.5,abc"], "slo.rho_max = 'abc'"),
    (["--set", "workload.rate_rps=1", "--set", "workload.rate_rps=2"], "swept twice"),
    (["--set", "workload.rate_rps=1,2", "--methods", "nope"], "--methods = 'nope'"),
    (["--set", "workload.rate_rps=1,2", "--engine", "spark"], "--engine = 'spark'"),
    (["--set", "workload.rate_rps=1,2", "--scheduler", "tcp://x:8786"], "needs --engine dask"),
    (["--set", "workload.rate_rps=1,2", "--workers", "0"], "--workers = 0"),
    (["--set", "workload.rate_rps=1,2", "--engine", "dask", "--scheduler", "notaurl"], "--scheduler = 'notaurl': not a Dask scheduler address"),
    (["--set", "workload.rate_rps=1,2", "--engine", "dask", "--scheduler", "foo://h:1"], "unknown protocol 'foo'"),
    (["--set", "workload.rate_rps=1,2", "--engine", "dask", "--scheduler", "tcp://h:70000"], "--scheduler = 'tcp://h:70000'"),
    (["--set", "workload.rate_rps=1,2", "--engine", "dask", "--connect-timeout-s", "0"], "--connect-timeout-s = 0.0"),
    (["--set", "workload.rate_rps=1,2", "--engine", "dask", "--connect-timeout-s", "nan"], "--connect-timeout-s = nan"),
])
def test_bad_study_exits_2_naming_the_field_and_writes_nothing(tmp_path, capsys, argv, named):
    out = tmp_path / "results.parquet"
    assert main(["sweep", TOY, *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert named in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.solved
def test_a_study_without_any_feasible_plan_exits_1(capsys):
    assert main(["sweep", TOY, "--set", "slo.ttft_p99_ms=1,2", "--methods", "sweep", "--engine", "serial"]) == 1
    assert "no_plan" in capsys.readouterr().out


@pytest.mark.unit
def test_results_file_must_be_parquet_or_csv(tmp_path, capsys):
    assert main(["sweep", TOY, "--set", "workload.rate_rps=1,2", "--out", str(tmp_path / "r.txt")]) == 2
    assert "--out" in capsys.readouterr().err


# --- studies that solve (the sweep heuristic on the toy fleet: milliseconds a scenario) ---

@pytest.fixture(scope="module")
def serial_table():
    return optfleet.sweep(TOY, {"workload.rate_rps": "50:200:50", "slo.ttft_p99_ms": [1, 10000]}, METHODS, engine="serial")


def _comparable(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=["seconds"]).reset_index(drop=True)


@pytest.mark.solved
def test_table_is_tidy_and_in_scenario_order(serial_table):
    frame = serial_table
    assert len(frame) == 4 * 2 * 2
    assert list(frame.columns[:3]) == ["workload.rate_rps", "slo.ttft_p99_ms", "method"]
    assert list(frame.columns[-2:]) == ["error", KEY]
    assert list(frame["workload.rate_rps"]) == [r for r in (50, 100, 150, 200) for _ in range(4)]
    assert list(frame["method"]) == ["sweep", "homogeneous"] * 8
    # The toy at 100 req/s is worked out by hand (tests/test_toy_fleet.py): 17 GPUs swept, 26 homogeneous at $1/GPU-h.
    at_100 = frame[(frame["workload.rate_rps"] == 100) & (frame["slo.ttft_p99_ms"] == 10000)]
    assert list(at_100["objective"]) == [17, 26]
    # A 1 ms SLO cannot be met: the rows say so, the study goes on.
    assert set(frame[frame["slo.ttft_p99_ms"] == 1]["status"]) == {"no_plan"}
    assert frame.attrs["solved"] == 8 and frame.attrs["failed"] == 0


@pytest.mark.solved
def test_a_scenario_failing_when_prepared_is_a_row_with_its_error():
    frame = optfleet.sweep(TOY, {"hardware.slots.table": [{2000: 4, 4000: 2}, {2000: 0, 4000: 2}]}, "sweep", engine="serial")
    ok, bad = frame.to_dict("records")
    assert ok["status"] == "heuristic" and pd.isna(ok["error"])
    assert bad["status"] == "bad_input" and "0 KV slots" in bad["error"] and pd.isna(bad["objective"])
    assert frame.attrs["failed"] == 1


@pytest.mark.solved
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_rerun_with_the_same_file_skips_done_scenarios(tmp_path, suffix):
    out = tmp_path / f"results{suffix}"
    first = optfleet.sweep(TOY, {"workload.rate_rps": [50, 100]}, METHODS, engine="serial", out=out)
    assert first.attrs["solved"] == 2
    stored = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
    stored.loc[0, "objective"] = 999  # a mark a re-solve would wipe out
    stored.to_csv(out, index=False) if suffix == ".csv" else stored.to_parquet(out, index=False)

    second = optfleet.sweep(TOY, {"workload.rate_rps": [50, 100, 150]}, METHODS, engine="serial", out=out)
    assert (second.attrs["solved"], second.attrs["resumed"]) == (1, 2)
    assert list(second["workload.rate_rps"]) == [50, 50, 100, 100, 150, 150]
    assert second.loc[0, "objective"] == 999
    reread = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
    assert list(reread["workload.rate_rps"]) == [50, 50, 100, 100, 150, 150]

    more_methods = optfleet.sweep(TOY, {"workload.rate_rps": [50]}, "sweep,homogeneous,pool-routing", engine="serial", out=out)
    assert more_methods.attrs["solved"] == 1  # a scenario missing a method is solved again
    assert len(more_methods) == 3 + 4


@pytest.mark.solved
def test_engines_give_identical_tables_and_a_pool_runs_after_dask_and_highs():
    """The serial engine, the local pool and Dask give the same tables.  The pools run after a Dask study and a HiGHS
    solve in this process (their threads exist): a pool forked from it would hang.  One test, so that one Dask
    cluster (some 7 s to start and close here) serves both."""
    axes = {"workload.rate_rps": "50:245:5", "slo.ttft_p99_ms": [1, 10000]}  # 80 scenarios: batches of 5 on 2 workers
    serial = optfleet.sweep(TOY, axes, METHODS, engine="serial")
    dask = optfleet.sweep(TOY, axes, METHODS, engine="dask", workers=2)
    assert len(serial) == 160 and serial["objective"].notna().sum() == 80
    pd.testing.assert_frame_equal(_comparable(dask), _comparable(serial))
    milp_axes = {"workload.rate_rps": [50, 100, 150]}
    serial_milp = optfleet.sweep(TOY, milp_axes, "milp", engine="serial")  # HiGHS runs in this process
    assert list(serial_milp["status"]) == ["optimal"] * 3
    pool = optfleet.sweep(TOY, axes, METHODS, engine="local", workers=2)
    pd.testing.assert_frame_equal(_comparable(pool), _comparable(serial))
    pool_milp = optfleet.sweep(TOY, milp_axes, "milp", engine="local", workers=2)
    pd.testing.assert_frame_equal(_comparable(pool_milp), _comparable(serial_milp))


@pytest.mark.solved
def test_cli_json_is_one_document_and_plot_writes_a_png(tmp_path, capsys):
    out = tmp_path / "results.parquet"
    assert main(["sweep", TOY, "--set", "workload.rate_rps=50,100", "--methods", METHODS, "--engine", "serial",
                 "--out", str(out), "--json", "--quiet"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["fields"] == ["workload.rate_rps"] and len(document["rows"]) == 4
    assert [row["objective"] for row in document["rows"] if row["workload.rate_rps"] == 100] == [17, 26]

    png = tmp_path / "cost.png"
    assert main(["plot", str(out), "--x", "workload.rate_rps", "--y", "objective", "--hue", "method", "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    assert main(["plot", str(out), "--x", "workload.rate", "--y", "objective", "--out", str(tmp_path / "no.png")]) == 2
    err = capsys.readouterr().err
    assert "--x = 'workload.rate': no such column; available: workload.rate_rps, method" in err
    assert not (tmp_path / "no.png").exists()
    assert main(["plot", str(out), "--x", "workload.rate_rps", "--y", "gap_pct", "--out", str(tmp_path / "no.png")]) == 2
    assert "--y = 'gap_pct': no row has both" in capsys.readouterr().err
    assert not (tmp_path / "no.png").exists()


@pytest.mark.unit
@pytest.mark.parametrize(("column", "label"), [
    ("workload.rate_rps", "workload rate (req/s)"),
    ("slo.ttft_p99_ms", "slo ttft p99 (ms)"),
    ("cost_per_hour", "cost ($/h)"),
    ("gap_pct", "gap (%)"),
    ("seconds", "seconds (s)"),
    ("objective", "objective ($/h)"),
    ("gpus", "gpus"),
])
def test_axis_labels_carry_the_units_of_the_column_names(column, label):
    from optfleet.studies.plot import axis_label

    assert axis_label(column, pd.DataFrame({"objective_unit": ["$/h", "$/h"]})) == label


@pytest.mark.solved
def test_the_guides_study_commands_run(tmp_path, monkeypatch, capsys):
    """The user guide's "Studies" commands run as printed (their out/ folder moved to a temporary one)."""
    import re
    import shlex

    from support import REPO

    section = (REPO / "docs" / "guide" / "studies.md").read_text()
    commands = re.search(r"```bash\n(.*?)```", section, flags=re.S).group(1).strip().splitlines()
    assert [c.split()[:2] for c in commands] == [["optfleet", "sweep"], ["optfleet", "plot"]]
    monkeypatch.chdir(REPO)
    for command in commands:
        argv = [arg.replace("out/", f"{tmp_path}/") for arg in shlex.split(command)[1:]]
        assert main([*argv, "--workers", "1"] if argv[0] == "sweep" else argv) == 0, capsys.readouterr().err
    assert (tmp_path / "azure_rate.png").read_bytes()[:4] == b"\x89PNG"
    assert len(pd.read_csv(tmp_path / "azure_rate.csv")) == 8 * 2
    quoted = "error: workload.rate_rps = 0: Input should be greater than 0 (in scenario 1 (workload.rate_rps=0))"
    assert main(["sweep", "instances/fleet/azure_2023.yaml", "--set", "workload.rate_rps=5,0"]) == 2
    assert quoted in section and quoted in capsys.readouterr().err


@pytest.mark.unit
def test_a_column_mixing_value_types_is_written_as_text(tmp_path):
    from optfleet.studies.table import assemble, write_table

    row = {"method": "sweep", "status": "heuristic", "objective": 1.0}
    frame = assemble([{"f": 1}, {"f": "x"}], {0: [row], 1: [row]}, [])
    write_table(frame, tmp_path / "mixed.parquet")
    assert list(pd.read_parquet(tmp_path / "mixed.parquet")["f"]) == ["1", "x"]


@pytest.mark.unit
def test_progress_line_shows_the_bar_the_count_the_rate_and_the_failures():
    import io

    from optfleet.progress import progress_display

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    progress_display("sweep", stream=stream, delay_s=0.0, unit="scenarios")("1 failed", 4, 4)
    line = stream.getvalue()
    assert "sweep: [####################] 100 % 4/4 scenarios, " in line and "/s," in line and line.rstrip().endswith("; 1 failed")


@pytest.mark.solved
def test_dask_engine_on_a_running_scheduler(serial_table, capsys):
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        assert main(["sweep", TOY, "--set", "workload.rate_rps=50:200:50", "--set", "slo.ttft_p99_ms=1,10000", "--methods", METHODS,
                     "--engine", "dask", "--scheduler", cluster.scheduler_address, "--json", "--quiet"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [row["objective"] for row in rows] == [None if pd.isna(v) else v for v in serial_table["objective"]]


def test_a_scheduler_address_that_refuses_or_does_not_speak_dask_fails_within_the_connect_timeout(capsys):
    """A closed port is refused and a TCP service that accepts but never answers (it kept distributed's client waiting
    for ever) is given up after --connect-timeout-s: exit 2 naming --scheduler, one line, each within a few seconds
    of the timeout (no wall-clock assertion: the test would hang, not fail, without the limit)."""
    import socket

    with socket.socket() as silent, socket.socket() as closed:
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)  # accepts connections, never writes
        closed.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        for sock, said in ((silent, "does not answer as a Dask scheduler"), (closed, "cannot reach a Dask scheduler within 1 s")):
            address = "tcp://127.0.0.1:%d" % sock.getsockname()[1]
            assert main(["sweep", TOY, "--set", "workload.rate_rps=50,100", "--engine", "dask", "--scheduler", address,
                         "--connect-timeout-s", "1", "--quiet"]) == 2
            err = capsys.readouterr().err
            assert f"--scheduler = '{address}'" in err and said in err and len(err.strip().splitlines()) == 1


@pytest.mark.unit
def test_pool_workers_use_single_threaded_numerical_libraries(monkeypatch):
    """A pool worker's initializer asks BLAS/OpenMP for one thread (before numpy loads there); a user's value wins."""
    from optfleet.instance.loader import load_instance
    from optfleet.studies import engines

    for name in engines.SINGLE_THREADED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "4")
    monkeypatch.setattr(engines, "_WORKER_BASE", None)
    engines._load_base(load_instance(TOY))
    assert [os.environ[name] for name in engines.SINGLE_THREADED] == ["1", "1", "4"]
    assert engines._WORKER_BASE is not None


@pytest.mark.unit
def test_batches_keep_the_order_and_cover_the_study():
    from optfleet.studies.engines import TASKS_PER_WORKER, batches

    study = [(i, {"f": i}) for i in range(1000)]
    cut = batches(study, 2)
    assert [pair for batch in cut for pair in batch] == study
    assert len(cut) == 2 * TASKS_PER_WORKER
    assert batches(study[:3], 2) == [[pair] for pair in study[:3]]


def test_a_set_field_may_index_lists_with_brackets():
    """``constraints[0].max_cost_per_hour`` reads as ``constraints.0.max_cost_per_hour`` (a review: it was refused
    with a message that named no field)."""
    from optfleet.studies.overrides import split_assignment

    assert split_assignment("constraints[0].max_cost_per_hour=5", "FIELD=VALUE") == ("constraints.0.max_cost_per_hour", "5")
    assert split_assignment("gpus[1][0]=2", "FIELD=VALUE") == ("gpus.1.0", "2")
