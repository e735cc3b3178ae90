"""Serving decisions: the decide use case, the HTTP app, its guards and limits, workers, the MCP server (stdio and
HTTP), the compact view and the decision browser."""
