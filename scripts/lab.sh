#!/usr/bin/env bash
# Set up jupyter-ci in ./.venv and open JupyterLab on the example notebook.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup-env.sh lab
args=(--notebook-dir=. --ServerApp.open_browser="${JUPYTER_CI_OPEN_BROWSER:-True}")
[ "$(id -u)" = 0 ] && args+=(--allow-root)
exec jupyter lab "${args[@]}" "$@" examples/getting-started.ipynb
