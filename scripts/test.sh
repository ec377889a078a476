#!/usr/bin/env bash
# Install what the tests need (./.venv, ./.venv-floors, Debian's Chromium) and run every check
# and test: the kernel-side and browser tests twice, the second time on the oldest Jupyter
# stack the package declares (tests/floors.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup-env.sh test
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq chromium >/dev/null; fi
fi
ruff check .
mypy
bash scripts/docs.sh -q  # the docs site, warnings as errors (docs/, Sphinx + MyST)
lint-imports --no-cache  # the layers of DESIGN.md (contracts in pyproject.toml)
(cd labextension && jlpm test)
# Two workers (pytest-xdist): most tests wait on kernels and servers. The hub and docs tests
# are each one group (one Hub, one server); the browser tests run last (tests/ui/fixtures.py).
python -m pytest -n 2 --dist loadgroup "$@"
# The kernel side and the browser again, on the oldest Jupyter stack the package declares.
. scripts/setup-floors.sh
(. .venv-floors/bin/activate && python -m pytest -n 2 --dist loadgroup $(python -m tests.floors) "$@")
