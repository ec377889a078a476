# Sourced by lab.sh and test.sh: create ./.venv and install jupyter-ci with the given extra.
# The labextension is built by hatch-jupyter-builder during the install (Node 18+ needed).
extra="$1"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q -e ".[$extra]"
# Serve the labextension from the working tree (a symlink), so `jlpm build` is picked up.
jupyter labextension develop --overwrite . >/dev/null 2>&1
# The sandbox of REST sessions and "Python 3 (sandboxed)" kernels needs bubblewrap (Linux).
if [ "$(uname -s)" = Linux ] && ! command -v bwrap >/dev/null 2>&1; then
  sudo_=""
  [ "$(id -u)" = 0 ] || sudo_="sudo -n"
  if command -v apt-get >/dev/null 2>&1 && { [ -z "$sudo_" ] || sudo -n true 2>/dev/null; } &&
     { $sudo_ apt-get install -y -qq bubblewrap >/dev/null 2>&1 ||
       { $sudo_ apt-get update -qq && $sudo_ apt-get install -y -qq bubblewrap >/dev/null; }; }; then
    echo "installed bubblewrap (the sandbox of REST sessions)" >&2
  else
    echo "note: bubblewrap could not be installed here, so REST sessions run unboxed;" \
         "install the bubblewrap package (e.g. sudo apt-get install bubblewrap) to box them." >&2
  fi
fi
# The MCP Inspector (pinned in tests/mcp-inspector), whose CLI tests/test_mcp_inspector.py runs.
if [ "$extra" = test ] && command -v npm >/dev/null 2>&1 && [ ! -d tests/mcp-inspector/node_modules ]; then
  (cd tests/mcp-inspector && npm ci --no-audit --no-fund --silent >/dev/null 2>&1) ||
    echo "note: the MCP Inspector could not be installed; tests/test_mcp_inspector.py is skipped." >&2
fi
# Kernels of other languages (bash, Deno, R) for REST sessions: tests/test_languages.py uses
# them. About 10 s the first time (R's Debian packages), a fraction of a second after.
if [ "$extra" = test ]; then
  bash scripts/install-languages.sh --with-r
fi
