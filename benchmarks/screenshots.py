"""Regenerate the README's screenshots, made by the app itself (Textual's own screenshot export).

The dashboard is driven through `make_app` by the UI tests' scenario scripts (tests/support/scenarios.py: a server
ready after an A/B sweep, on a fixed clock), so every run draws the same picture. Each SVG is converted to PNG
with rsvg-convert (librsvg2-bin), after turning the SVG's non-breaking spaces into spaces (librsvg would
otherwise draw them wider than the terminal's cells) and asking it to keep every space (xml:space).

    .venv/bin/python benchmarks/screenshots.py          # writes docs/images/*.png

Look at the PNGs before committing them.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specdash.config import UIConfig  # noqa: E402
from specdash.ui.app import make_app  # noqa: E402
from tests.support import scenarios as sc  # noqa: E402
from tests.support.fake_session import FakeSession  # noqa: E402
from tests.support.settle import settle_screen  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "docs" / "images"

SHOTS = [
    # (name, terminal size, keys pressed before the shot)
    ("dashboard", (160, 45), []),
    ("sweep-80x24", (80, 24), ["v"]),
]


async def shoot(size: tuple[int, int], keys: list[str]) -> str:
    """The app's own SVG screenshot of the scenario at `size`, after `keys`."""
    session = FakeSession(sc.ready_with_bench(), label="root@gpu-box")
    app = make_app(session, config_ui=UIConfig(bell=False), clock=lambda: sc.NOW, live=False)
    async with app.run_test(size=size) as pilot:
        await settle_screen(pilot)
        for key in keys:
            await pilot.press(key)
            await settle_screen(pilot)
        return app.export_screenshot(title="specdash")


def to_png(svg: str, png: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "shot.svg"
        # xml:space="preserve": without it librsvg collapses the spaces that separate a key from its label.
        plain.write_text(svg.replace("&#160;", " ").replace("<svg ", '<svg xml:space="preserve" ', 1), encoding="utf-8")
        subprocess.run(["rsvg-convert", str(plain), "-o", str(png)], check=True)
    return png


def main() -> int:
    if shutil.which("rsvg-convert") is None:
        print("screenshots: rsvg-convert not found (Debian: apt-get install librsvg2-bin)", file=sys.stderr)
        return 1
    OUT.mkdir(parents=True, exist_ok=True)
    for name, size, keys in SHOTS:
        svg = asyncio.run(shoot(size, keys))
        print(to_png(svg, OUT / f"{name}.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
