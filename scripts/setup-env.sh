# Sourced by lab.sh and test.sh: create ./.venv and install jupyter-ci with the given extra.
# The first run says what it does, a line per phase; a later one skips what did not change:
# pip when pyproject.toml, the extra and Python are those of the last install (an editable
# install already sees changes to the Python code), the labextension's build when its
# sources (labextension/src, style, schema, package.json, yarn.lock) are those it was built from.
extra="$1"
_ci_step() { echo "jupyter-ci setup: $*" >&2; }
if [ ! -x .venv/bin/python ]; then
  _ci_step "creating the virtual environment ./.venv"
  python3 -m venv .venv
fi
. .venv/bin/activate
_ci_pip_stamp=".venv/.jupyter-ci-pip-$extra"
_ci_pip_want="$(python -V 2>&1) $(sha256sum pyproject.toml | cut -c1-64)"
_ci_lab_stamp=.venv/.jupyter-ci-labextension
_ci_lab_want="$(find labextension/src labextension/style labextension/schema \
  labextension/package.json labextension/yarn.lock -type f -print0 2>/dev/null | sort -z |
  xargs -0 sha256sum | sha256sum | cut -c1-64 || true)"
# The test extra holds the lab extra: an install for the tests serves lab.sh as it is.
if [ "$(cat "$_ci_pip_stamp" 2>/dev/null)" != "$_ci_pip_want" ] &&
   { [ "$extra" != lab ] || [ "$(cat .venv/.jupyter-ci-pip-test 2>/dev/null)" != "$_ci_pip_want" ]; }; then
  _ci_built=jupyter_ci/labextension/static/style.js
  if [ -e "$_ci_built" ]; then
    _ci_step "installing the Python packages (jupyter-ci[$extra] and what it needs)"
  else
    _ci_step "installing the Python packages (jupyter-ci[$extra]) and building the" \
             "JupyterLab extension: about 2 minutes the first time"
  fi
  python -m pip install -q --upgrade pip
  python -m pip install -q -e ".[$extra]"
  # The install built the extension from these sources when it was missing (else it skips).
  [ -e "$_ci_built" ] && [ ! -e "$_ci_lab_stamp" ] && echo "$_ci_lab_want" > "$_ci_lab_stamp"
  echo "$_ci_pip_want" > "$_ci_pip_stamp"
fi
if [ "$(cat "$_ci_lab_stamp" 2>/dev/null)" != "$_ci_lab_want" ]; then
  _ci_step "building the JupyterLab extension (its sources changed)"
  (cd labextension && jlpm install >/dev/null && jlpm build:prod >/dev/null)
  echo "$_ci_lab_want" > "$_ci_lab_stamp"
fi
# Serve the labextension from the working tree (a symlink), so `jlpm build` is picked up
# (an install may leave a copy there instead).
# No "receive official Jupyter news?" pop-up on a first start (scripts/lab_settings.py).
python scripts/lab_settings.py
if [ ! -L .venv/share/jupyter/labextensions/jupyter-ci ]; then
  jupyter labextension develop --overwrite . >/dev/null 2>&1
fi
# The sandbox of REST sessions and "Python 3 (sandboxed)" kernels needs bubblewrap (Linux).
if [ "$(uname -s)" = Linux ] && ! command -v bwrap >/dev/null 2>&1; then
  _ci_step "installing bubblewrap (the sandbox of REST sessions)"
  sudo_=""
  [ "$(id -u)" = 0 ] || sudo_="sudo -n"
  if command -v apt-get >/dev/null 2>&1 && { [ -z "$sudo_" ] || sudo -n true 2>/dev/null; } &&
     { $sudo_ apt-get install -y -qq bubblewrap >/dev/null 2>&1 ||
       { $sudo_ apt-get update -qq && $sudo_ apt-get install -y -qq bubblewrap >/dev/null; }; }; then
    _ci_step "installed bubblewrap"
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
# JupyterHub's proxy (configurable-http-proxy, pinned in tests/hub-proxy), which the real
# JupyterHub of tests/hub starts.
if [ "$extra" = test ] && command -v npm >/dev/null 2>&1 && [ ! -d tests/hub-proxy/node_modules ]; then
  (cd tests/hub-proxy && npm ci --no-audit --no-fund --silent >/dev/null 2>&1) ||
    echo "note: configurable-http-proxy could not be installed; tests/hub is skipped." >&2
fi
# Kernels of other languages (bash, Deno, R, Java) for REST sessions: tests/test_languages*.py
# use them. Tens of seconds the first time (R's and the JDK's Debian packages), a fraction of a
# second after.
if [ "$extra" = test ]; then
  bash scripts/install-languages.sh --with-r
fi
