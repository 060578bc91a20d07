"""Sphinx configuration of optfleet's documentation (MyST Markdown, Furo, sphinx-gallery).

Build: ``pip install -e '.[docs]' && sphinx-build -W docs docs/_build`` (``-W``: warnings are errors, as in CI).
The reference pages are generated from the code when the build starts (_ext/optfleet_docs.py), and every example
of the gallery (docs/examples/) runs during the build.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

project = "optfleet"
author = "the optfleet developers"
copyright = "optfleet developers, Apache-2.0"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx_gallery.gen_gallery", "optfleet_docs"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}  # the gallery writes reStructuredText
exclude_patterns = ["_build", "examples/README.md", "auto_examples/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip",
                    "auto_examples/*.md5", "auto_examples/*.codeobj.json"]
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3


html_theme = "furo"
html_title = "optfleet"

autodoc_member_order = "bysource"
autodoc_typehints = "description"

sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "abort_on_example_error": True,
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",  # plot_1_..., plot_2_...: the fleet first
}
