"""Serving decisions: the decide use case, the HTTP app, its guards and limits, workers, and the MCP server."""
