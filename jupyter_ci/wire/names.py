"""The names both sides of a process boundary use (kernel, server, browser)."""

from __future__ import annotations

#: The protocol version the labextension announces in every execute_request.
PROTOCOL_VERSION = 2
#: The comm target the kernel opens one comm on per ask.
COMM_TARGET = "jupyter_ci"
#: The key of the frontend announcement in execute_request metadata.
FRONTEND_KEY = "jupyter_ci_frontend"
#: The cell (and notebook) metadata key of ask records and generated-cell records.
METADATA_KEY = "jupyter_ci"
#: The route below the model service's URL that streams one turn.
TURN_PATH = "turn"
#: The folder below Jupyter's data dir holding jupyter-ci's files, and the record key's name.
DATA_FOLDER = "jupyter_ci"
RECORD_SECRET = "record_secret"
#: Set in every box a kernel runs in ("notebook" or "session"): absent, the kernel is unboxed.
BOXED_VARIABLE = "JUPYTER_CI_BOXED"
