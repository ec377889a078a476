"""jupyter-ci as an MCP server: `jupyter-ci mcp` on stdio, and /jupyter-ci/mcp on the server."""
