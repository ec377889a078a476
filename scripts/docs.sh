#!/usr/bin/env bash
# Build the docs site (Sphinx + MyST, docs/) into docs/_build/html with warnings as errors.
# Nothing is fetched: no intersphinx, no CDN at build time. Needs the `docs` extra.
set -euo pipefail
cd "$(dirname "$0")/.."
# -E: read every page again, so a warning never hides behind a cached build (about 5 s).
python -m sphinx -E -W --keep-going -n -b html docs docs/_build/html "$@"
