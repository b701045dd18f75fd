"""Summarisers: the protocol, the extractive default and the LLM backends."""
