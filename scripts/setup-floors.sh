# Sourced by test.sh: ./.venv-floors, jupyter-ci on the oldest Jupyter stack it declares
# (tests/floors.txt: IPython, ipykernel, jupyter_server, jupyter_client, JupyterLab), with
# what the kernel-side and browser tests need. The labextension is the one test.sh built.
if [ ! -x .venv-floors/bin/python ]; then
  python3 -m venv .venv-floors
fi
.venv-floors/bin/python -m pip install -q --upgrade pip
.venv-floors/bin/python -m pip install -q -e ".[test-floors]" -c tests/floors.txt
.venv-floors/bin/python scripts/lab_settings.py  # no news pop-up, as in ./.venv
# JupyterLab's extension: a copy of the one built for ./.venv (JupyterLab 4.2 serves no
# symlinked extension, as `jupyter labextension develop` makes).
labextensions=.venv-floors/share/jupyter/labextensions
rm -rf "$labextensions/jupyter-ci"
mkdir -p "$labextensions"
cp -r jupyter_ci/labextension "$labextensions/jupyter-ci"
