"""Where requests enter: the HTTP API and its door (bearer tokens), the query-only API, the MCP server, the
documents' handlers.
"""
