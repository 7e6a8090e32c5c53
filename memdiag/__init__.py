"""memdiag: find which memory layer of an LLM agent forgot, and why."""

__version__ = "0.2.0"
