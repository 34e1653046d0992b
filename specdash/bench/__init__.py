"""Measurement: the streaming probe, concurrency sweeps and the local SQLite store."""
