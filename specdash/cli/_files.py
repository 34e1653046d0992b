"""Writing an output file the user named (`export -o`, `report -o`/`--png`, `config init`): one way, one message.

What the parser could not tell (`specdash.cli.options.output_file` refuses directories and missing parents)
shows at the write: no permission, a read-only or full disk, /proc. That is a runtime error (exit 1) naming
the file; the data it came from (the store, the config) is untouched.
"""

from __future__ import annotations

from pathlib import Path

from specdash.errors import SpecdashError


def write_file(path: Path, data: str | bytes, what: str) -> None:
    """Write `data` to `path` (text as UTF-8); a `SpecdashError` naming `what` and `path` when that fails.

    The error is checked at close as well: a full disk often says so only when the last block is flushed.
    """
    try:
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_bytes(data)
    except OSError as exc:
        raise SpecdashError(f"cannot write {what} {path}: {exc.strerror or exc}") from None
