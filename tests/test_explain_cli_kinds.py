"""optfleet explain from the command line on the routing and caching kinds: bad options exit 2 naming the option;
--json is one document and --plot writes the curves."""

from __future__ import annotations

import json

import pytest

from optfleet.cli import main
from optfleet.errors import EXIT_BAD_INPUT, EXIT_OK
from tests.support import REPO

ROUTING = REPO / "instances" / "routing" / "tiny.yaml"
CACHING = REPO / "instances" / "caching" / "tiny.yaml"


@pytest.mark.parametrize("path, option, value", [
    (ROUTING, "--curve", "percentile=0.9,1.0"),  # a percentile outside (0, 1)
    (ROUTING, "--curve", "epsilon=0.1:0.1:3"),  # an empty range
    (ROUTING, "--curve", "window=1:2:3"),  # a parameter the kind does not have
    (ROUTING, "--break-even", "price:L40S"),
    (CACHING, "--curve", "capacity_tokens=0,100"),
    (CACHING, "--curve", "capacity_tokens=200:100:3"),
    (CACHING, "--curve", "rate_growth=1:2:3"),
    (CACHING, "--break-even", "percentile"),
])
def test_bad_options_exit_2_naming_the_option(path, option, value, capsys):
    assert main(["explain", str(path), option, value, "--quiet"]) == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    assert option in captured.err and value.split("=")[0] in captured.err and captured.out == ""


@pytest.mark.parametrize("path, curve, kind, objective, tables", [
    (ROUTING, "ttft_ms=2000,10000", "routing", 20.0, {"binding", "shadow_prices", "price_ranges", "curve:percentile", "curve:ttft_ms"}),
    (CACHING, "xi_ms=30,50,80", "caching", 10.0, {"binding", "shadow_prices", "curve:capacity_tokens", "curve:xi_ms"}),
])
def test_json_is_one_document_and_plot_is_written(path, curve, kind, objective, tables, tmp_path, capsys):
    png = tmp_path / "curves.png"
    assert main(["explain", str(path), "--json", "--quiet", "--curve", curve, "--plot", str(png)]) == EXIT_OK
    document = json.loads(capsys.readouterr().out)
    assert document["kind"] == kind and document["plan"]["objective"] == pytest.approx(objective)
    assert tables <= set(document["tables"])
    assert png.stat().st_size > 0
