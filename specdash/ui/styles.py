"""Locate the app's `.tcss` files: inside the installed package, or in the source tree."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent


def styles_dir() -> Path:
    """The directory holding the `.tcss` files.

    A wheel carries them as `specdash/styles/` (hatch force-include); an editable install or a source
    checkout has them in `styles/` beside the package.
    """
    for candidate in (_PACKAGE / "styles", _PACKAGE.parent / "styles"):
        if (candidate / "app.tcss").is_file():
            return candidate
    raise FileNotFoundError(f"specdash styles not found under {_PACKAGE}")


def css_paths() -> list[Path]:
    """Every stylesheet of the app, in load order."""
    return sorted(styles_dir().glob("*.tcss"))
