"""memstream: a streaming memory pipeline for coding agents."""
