#!/usr/bin/env bash
# Set up jupyter-ci in ./.venv and open JupyterLab on the example notebook.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup-env.sh lab
# default_url, not a file argument: the URLs the server prints lead to the notebook too.
args=(--notebook-dir=. --ServerApp.open_browser="${JUPYTER_CI_OPEN_BROWSER:-True}"
      --LabApp.default_url=/lab/tree/examples/getting-started.ipynb)
[ "$(id -u)" = 0 ] && args+=(--allow-root)
exec jupyter lab "${args[@]}" "$@"
