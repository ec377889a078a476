#!/usr/bin/env bash
# Set up jupyter-ci in ./.venv and open JupyterLab on the example notebook; once the server
# answers, print how to reach its REST API and MCP from another terminal.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup-env.sh lab
# The server's token: $JUPYTER_TOKEN (or $JUPYTER_TOKEN_FILE) when set, else one kept in
# Jupyter's data folder (mode 0600, out of the repository and of every box), so a restart
# keeps the token clients were given. Handed over as a file: its value is in no kernel's
# environment.
if [ -z "${JUPYTER_TOKEN:-}" ] && [ -z "${JUPYTER_TOKEN_FILE:-}" ]; then
  JUPYTER_TOKEN_FILE="$(jupyter --data-dir)/jupyter-ci-token"
  export JUPYTER_TOKEN_FILE
  if [ ! -s "$JUPYTER_TOKEN_FILE" ]; then
    mkdir -p "$(dirname "$JUPYTER_TOKEN_FILE")"
    (umask 077 && python -c 'import secrets; print(secrets.token_hex(24), end="")' \
       > "$JUPYTER_TOKEN_FILE")
  fi
fi
# default_url, not a file argument: the URLs the server prints lead to the notebook too. The
# file browser stays at the root (file-browser-path), so File > New > Notebook puts new
# notebooks there, not in examples/.
page=/lab/tree/examples/getting-started.ipynb?file-browser-path=/
args=(--notebook-dir=. --ServerApp.open_browser="${JUPYTER_CI_OPEN_BROWSER:-True}"
      --LabApp.default_url="$page")
[ "$(id -u)" = 0 ] && args+=(--allow-root)
# The server keeps this shell's pid (exec): the helper finds it by that, whatever its port.
python scripts/lab_ready.py "$$" "$page" &
exec jupyter lab "${args[@]}" "$@"
