"""The shareable report of stored runs: static charts (matplotlib) and one self-contained HTML page."""
