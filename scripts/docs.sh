#!/usr/bin/env bash
# Build the docs site (Sphinx + MyST, docs/) into docs/_build/html with warnings as errors.
# Nothing is fetched: no intersphinx, no CDN at build time. Needs the `docs` extra, which
# `bash scripts/test.sh` installs into ./.venv; from a fresh shell this uses that venv.
set -euo pipefail
cd "$(dirname "$0")/.."
python=python
if [ -x .venv/bin/python ] && [ "${VIRTUAL_ENV:-}" != "$PWD/.venv" ]; then
  python=.venv/bin/python
fi
if ! "$python" -c "import sphinx, myst_parser" 2>/dev/null; then
  echo "scripts/docs.sh: Sphinx is not installed in $("$python" -c 'import sys; print(sys.prefix)')." \
       "Run 'bash scripts/test.sh' once (it installs the docs extra into ./.venv), or" \
       "'pip install -e \".[docs]\"'." >&2
  exit 1
fi
# -E: read every page again, so a warning never hides behind a cached build (about 5 s).
"$python" -m sphinx -E -W --keep-going -n -b html docs docs/_build/html "$@"
