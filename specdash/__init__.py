"""specdash: a keyboard-driven terminal control panel for LLM inference servers with speculative decoding."""

__version__ = "0.1.0"
