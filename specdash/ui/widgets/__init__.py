"""Dashboard widgets, grouped by screen area."""
