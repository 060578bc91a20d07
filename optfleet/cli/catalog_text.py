"""``optfleet catalog`` as text: one section per performance source under a ``SOURCE: about`` heading, its tables
fitted to the output width (optfleet/tables.py), each catalog column headed with its unit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from optfleet import tables
from optfleet.tables import HIGH, KEY, LOW, MEDIUM, Block, Column, Table

# catalog field -> (heading with unit, importance); a field not listed shows its name, MEDIUM
CATALOG_COLUMNS: dict[str, tuple[str, int]] = {
    "name": ("name", KEY),
    # GPUs
    "hbm_gb": ("HBM GB", KEY), "hbm_tb_s": ("HBM TB/s", KEY), "bf16_dense_tflops": ("BF16 TFLOPS", KEY),
    "cost_per_gpu_hour": ("$/GPU-h", KEY), "interconnect": ("interconnect", HIGH), "interconnect_gb_s": ("link GB/s", HIGH),
    "power_w": ("power W", HIGH),
    # models
    "layers": ("layers", KEY), "kv_heads": ("KV heads", KEY), "head_dim": ("head dim", HIGH), "params_billion": ("params B", KEY),
    "hidden_size": ("hidden", LOW), "intermediate_size": ("FFN", LOW), "active_params_billion": ("active B", HIGH),
    "attention_heads": ("heads", LOW), "kv_elements_per_token_per_layer": ("KV elem/tok/layer", LOW), "experts": ("experts", MEDIUM),
    "experts_per_token": ("experts/tok", MEDIUM), "architecture": ("architecture", MEDIUM),
    "weight_bytes_per_param": ("weight B/param", LOW), "kv_dtype_bytes": ("KV dtype B", LOW),
    "tied_embedding_params_billion": ("tied emb. B", LOW), "kv_bytes_per_token": ("KV bytes/token", HIGH),
}


def catalog_text(catalog: dict[str, dict[str, Any]]) -> str:
    """Every section of ``catalog`` (optfleet.engine.sources.source_catalog) as one page."""
    blocks: list[Block] = []
    for name, section in catalog.items():
        blocks += [f"{name.upper()}: {section['about']}", *SECTIONS[name](section), ""]
    return tables.page(blocks[:-1])


def _roofline(section: dict[str, Any]) -> list[Block]:
    """The GPU and model tables with their sources, the efficiencies and what a config.json may hold."""
    efficiencies = ", ".join(f"{name} {value:g}" for name, value in section["efficiencies"].items())
    return [*_spec_table("GPUS", section["gpus"]), *_spec_table("MODELS", section["models"]),
            f"  efficiencies (defaults; override under hardware.performance): {efficiencies}",
            *(f"  hardware.config_json {what.replace('_', ' ')}: {', '.join(names)}" for what, names in section["config_json"].items())]


def _spec_table(title: str, rows: list[dict[str, Any]]) -> list[Block]:
    """A catalog table without its ``source`` column, then one ``name: source`` line per row."""
    keys = list(dict.fromkeys(key for row in rows for key in row if key != "source"))
    columns = [Column(key, heading, tables.value, keep) for key in keys for heading, keep in [CATALOG_COLUMNS.get(key, (key, MEDIUM))]]
    return [title, Table(columns, rows), "sources:", *(f"  {row['name']}: {row['source']}" for row in rows), ""]


def _measured(section: dict[str, Any]) -> list[Block]:
    """One row per system and backend with its versions (slot names in brackets) and the bundled models; or why the
    database is unavailable."""
    if not section["installed"]:
        return [f"  not available: {section['problem']}",
                "  catalog GPUs it times: " + ", ".join(f"{gpu} ({system})" for gpu, system in section["gpu_systems"].items())]
    rows = [{"system": system, "gpu": entry["gpu"], "backend": backend,
             "versions": ", ".join(f"{v} ({', '.join(slots)})" if slots else v for v, slots in versions.items())}
            for system, entry in section["systems"].items() for backend, versions in entry["backends"].items()]
    columns = [Column("system", "system", keep=KEY), Column("gpu", "GPU", keep=KEY), Column("backend", "backend", keep=KEY),
               Column("versions", "versions", keep=MEDIUM)]
    return [f"  database: {section['database']}", Table(columns, rows),
            f"  bundled models ({len(section['models'])}): {', '.join(section['models'])}"]


def _fit(section: dict[str, Any]) -> list[Block]:
    """The file formats with their columns or tools, and what identifies each coefficient."""
    table, benchmarks = section["iteration_table"], section["serving_benchmarks"]
    return [*_named(f"iteration tables ({', '.join(table['suffixes'])}): {table['note']}; columns", table["columns"]),
            *_named(f"serving benchmark results ({', '.join(benchmarks['suffixes'])})", benchmarks["formats"]),
            *_named("what identifies each coefficient", section["identified_by"])]


def _affine(section: dict[str, Any]) -> list[Block]:
    """Each coefficient with its meaning."""
    return _named("coefficients (hardware.performance.<name>)", section["coefficients"])


def _named(title: str, meanings: dict[str, str]) -> list[Block]:
    """``  title:`` then one ``    name: meaning`` line per entry."""
    return [f"  {title}:", *(f"    {name}: {meaning}" for name, meaning in meanings.items())]


def _profile(section: dict[str, Any]) -> list[Block]:
    """Each published format with where it comes from."""
    return _named("formats (hardware.performance.file)", section["formats"])


SECTIONS: dict[str, Callable[[dict[str, Any]], list[Block]]] = {
    "roofline": _roofline, "measured": _measured, "fit": _fit, "affine": _affine, "profile": _profile,
}
