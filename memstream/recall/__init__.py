"""The read side: hybrid search, optional reranking, the [MEMORY] block and what a session gets at its start."""
