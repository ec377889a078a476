"""Sphinx configuration of jupyter-ci's docs (MyST Markdown, the PyData theme), built offline."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

from jupyter_ci._version import __version__  # noqa: E402  (after the path is set)

project = "jupyter-ci"
author = "jupyter-ci contributors"
copyright = "jupyter-ci contributors"
release = version = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "jupyter_ci_docs",  # docs/_ext: the settings reference and the REST API reference
]
source_suffix = {".md": "markdown"}
root_doc = "index"
# upstream/ holds reports for other projects and their reproductions: linked, not pages.
exclude_patterns = ["_build", "_generated", "upstream/*.py", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
# No intersphinx (the build fetches nothing): the standard library's and httpx's types, and
# the client's private aliases, are named in signatures without a link.
nitpick_ignore_regex = [
    ("py:class", r"(collections\.abc|os|typing|httpx)\..*"),
    ("py:class", r"jupyter_ci\.client\.formats\.(ServerDefault|Tools)"),
    # The wire's classes (jupyter_ci/wire; their JSON is in rest-api.md and protocol.md).
    ("py:class", r"(JSONObject|jupyter_ci\.wire\..*)"),
]

html_theme = "pydata_sphinx_theme"
html_title = "jupyter-ci"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    # No icon links or analytics: nothing on the page loads from another site at build time.
    "icon_links": [],
}
html_static_path: list[str] = []
# Every page in the left sidebar (the pages are one level deep, so the theme's section
# navigation would be empty).
html_sidebars = {"**": ["globaltoc.html"]}
