"""Pure logic: parsers, state machines, rolling series. No I/O and no Textual (enforced by a test)."""
