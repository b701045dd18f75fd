"""Text utilities shared by the pipeline and retrieval: token counting, keyphrases, embedding."""
