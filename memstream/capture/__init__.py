"""Capture (the capture spec): the coding CLIs' session files, read where they live, as turns with provenance.

``model`` holds the shapes every part shares; ``adapters`` turns one CLI's file into turns (pure); the
ingest machinery (checkpoints, first-seen dedup, spool, hooks, watch) publishes them to the turns topic.
"""
