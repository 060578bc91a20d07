"""The one renderer of text tables and pages (optfleet/tables.py): tables fit the width by hiding their least
important columns and say so, key columns never go, prose wraps with a hanging indent, no width shows everything."""

from __future__ import annotations

import io

import pytest

from optfleet import tables
from optfleet.tables import HIGH, KEY, LOW, MEDIUM, Column, Table

pytestmark = pytest.mark.unit

ROWS = [
    {"method": "homogeneous", "status": "heuristic", "feasible": True, "objective": 26.0, "objective_unit": "$/h", "bound": 17.0,
     "gap_pct": 52.94, "seconds": 0.0012, "pools": "4000:26", "gpus": 26, "instances": 26},
    {"method": "milp", "status": "optimal", "feasible": True, "objective": 17.0, "objective_unit": "$/h", "bound": 17.0,
     "gap_pct": 1e-12, "seconds": 0.736, "pools": "H200 x4 4096:61 + H100-SXM x8 8192:18 + H100-SXM x4 16384:1", "gpus": 392,
     "instances": 80},
]
EXTRA = [Column("pools", "pools", tables.text, MEDIUM), Column("gpus", "GPUs", tables.count, HIGH),
         Column("instances", "instances", tables.count, LOW)]


def _page(blocks: list[tables.Block], width: int | None) -> list[str]:
    with tables.output_width(width):
        return tables.page(blocks).splitlines()


def test_a_table_that_fits_is_shown_whole_with_units_in_its_headings():
    lines = _page([tables.comparison_table(ROWS, EXTRA)], 200)
    assert lines[0].split() == ["method", "status", "feasible", "objective", "$/h", "bound", "$/h", "gap", "%", "time", "s", "pools",
                                "GPUs", "instances"]
    assert len(lines) == 3 and max(map(len, lines)) <= 200
    assert lines[2].split()[3:6] == ["17.00", "17.00", "0"]  # a round-off gap prints 0; costs to the cent under a $/h heading


def test_a_wide_table_hides_its_least_important_columns_first_and_names_them():
    lines = _page([tables.comparison_table(ROWS, EXTRA)], 120)
    assert all(len(line) <= 120 for line in lines)
    header = lines[0]
    assert "instances" not in header and "pools" not in header  # LOW, then the rightmost MEDIUM
    assert "time s" in header and "GPUs" in header and "feasible" in header
    assert lines[-1] == "(2 columns hidden to fit 120 characters: pools, instances; --wide shows every column)"


def test_key_columns_stay_however_narrow_the_width():
    lines = _page([tables.comparison_table(ROWS, EXTRA)], 30)
    header = lines[0].split()
    assert header == ["method", "status", "objective", "$/h", "bound", "$/h", "gap", "%"]
    assert "feasible, time s, pools, GPUs, instances" in " ".join(line.strip() for line in lines[3:])


def test_no_width_shows_every_column_and_wraps_nothing():
    long_line = "note: " + "word " * 60
    lines = _page([long_line, tables.comparison_table(ROWS, EXTRA)], None)
    assert lines[0] == long_line and "instances" in lines[1] and "hidden" not in "\n".join(lines)
    assert len(lines[2]) > 120


def test_prose_wraps_at_spaces_with_a_hanging_indent():
    line = "  milp: " + " ".join(f"word{i}" for i in range(40))
    lines = _page([line], 50)
    assert len(lines) > 1 and all(len(part) <= 50 for part in lines)
    assert lines[0].startswith("  milp: word0") and all(part.startswith("      word") for part in lines[1:])
    assert " ".join(part.strip() for part in lines) == line.strip()


def test_numbers_are_right_aligned_and_labels_left():
    table = Table([Column("name", "name", keep=KEY), Column("n", "count", tables.count, KEY)], [{"name": "a", "n": 5}, {"name": "bbbb", "n": 12_000}])
    lines = _page([table], 120)
    assert lines == ["name   count", "a" + " " * 10 + "5", "bbbb  12,000"]


def test_a_table_without_rows_shows_its_headings():
    table = Table([Column("name", "name", keep=KEY), Column("n", "count", tables.count, LOW)], [])
    assert _page([table], 120) == ["name  count"]
    narrow = _page([table], 5)
    assert narrow[0] == "name"
    assert " ".join(line.strip() for line in narrow[1:]) == "(1 column hidden to fit 5 characters: count; --wide shows every column)"


def test_rows_in_different_units_carry_their_unit_in_each_cell():
    rows = [{**ROWS[0], "objective_unit": "ms"}, ROWS[1]]
    lines = _page([tables.comparison_table(rows)], 200)
    assert lines[0].split()[3:5] == ["objective", "bound"]
    assert "26 ms" in lines[1] and "$17.00/h" in lines[2]


def test_the_cli_width_is_120_off_a_terminal_and_none_with_wide():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert tables.display_width(False, io.StringIO()) == tables.DEFAULT_WIDTH == 120
    assert tables.display_width(True, io.StringIO()) is None
    assert tables.display_width(False, Terminal()) <= 120
