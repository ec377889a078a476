"""Turn off JupyterLab's "receive official Jupyter news?" pop-up in this Python environment.

On a first start it covered the panel's Send button. Written as an override of the
environment's defaults (`share/jupyter/lab/settings/overrides.json`), kept if set there.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PLUGIN = "@jupyterlab/apputils-extension:notification"


def main() -> None:
    """Add fetchNews = "false" to the environment's overrides, unless it says otherwise."""
    path = Path(sys.prefix, "share/jupyter/lab/settings/overrides.json")
    try:
        settings = json.loads(path.read_text())
    except (OSError, ValueError):
        settings = {}
    news = settings.setdefault(PLUGIN, {})
    if "fetchNews" not in news:
        news["fetchNews"] = "false"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings, indent=2) + "\n")


if __name__ == "__main__":
    main()
