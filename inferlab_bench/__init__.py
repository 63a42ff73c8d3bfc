"""inferlab-bench: an exact, reproducible bench client for LLM inference servers."""

__version__ = "0.1.0"
