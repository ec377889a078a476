"""REST sessions: a kernel, a directory and a history each, with runs, asks and files over HTTP."""
