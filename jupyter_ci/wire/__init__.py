"""The wire declared once: what crosses a process or a door, as standard-library dataclasses.

Nothing here imports the rest of jupyter_ci or anything outside the standard library, so
the kernel, the server, the client and the labextension's generated types all read one
declaration (scripts/gen_wire.py writes the TypeScript, OpenAPI and docs twins from it).
"""
