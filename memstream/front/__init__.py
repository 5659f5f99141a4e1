"""The front door: the app that serves the API, MCP, the console and events (``memstream.front.app``),
and the query-only ``memstream api`` (``memstream.front.query_api``)."""
