"""What enters the pipeline from outside: turns to publish, explicit memories, documents, forget requests, a
project's own files.
"""
