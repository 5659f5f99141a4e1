"""The pipeline as a process: the Faust app factory, the runner behind `memstream up`, and replay into a shadow
pipeline.
"""
