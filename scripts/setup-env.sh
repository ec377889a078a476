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
