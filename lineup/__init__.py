"""lineup: several LLMs side by side, judged blind, kept as a record."""
__version__ = "0.1.0"
