"""memstream: a streaming memory pipeline for coding agents."""

#: The package's version, as pyproject.toml declares it (tests/unit/test_mcp_stdio.py holds them equal):
#: read here, it costs nothing, where importlib.metadata took 75-125 ms of `memstream mcp`'s start.
__version__ = "0.1.0"
