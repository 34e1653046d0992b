"""`specdash report` in a real headless Chromium: no console error, no network request, charts on screen."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from specdash.cli import main
from specdash.report.charts import PALETTE
from tests.support.browser import CHROMIUM, load_page
from tests.support.results_store import make_store

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (make system-deps)")


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16)


def _count(pixels: np.ndarray, hex_colour: str, tol: int = 12) -> int:
    """Pixels within `tol` of the colour on every channel."""
    return int((np.abs(pixels.astype(int) - np.array(_rgb(hex_colour))) <= tol).all(axis=-1).sum())


def test_report_loads_offline_and_shows_the_charts(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    base, spec = make_store(db)
    page = tmp_path / "report.html"
    assert main(["report", str(base), str(spec), "--db", str(db), "-o", str(page), "--slo", "ttft_p90=80ms"]) == 0

    load = load_page(page)

    assert load.errors == []
    assert load.requests == []
    image = Image.open(io.BytesIO(load.screenshot)).convert("RGB")
    assert image.width >= 1200 and image.height > 2000  # the whole page: charts, tables, provenance
    (tmp_path / "report.png").write_bytes(load.screenshot)
    # The charts are drawn: many pixels in each mode's colour (blue baseline, orange eagle3 lines and markers).
    pixels = np.asarray(image)
    blue, orange = _count(pixels, PALETTE[0]), _count(pixels, PALETTE[1])
    assert blue > 2000 and orange > 2000, (blue, orange)
    assert (pixels == 255).all(axis=-1).mean() < 0.97
    # The top of the page (verdict, first charts) is not blank either.
    assert _count(pixels[:900], PALETTE[0]) > 200


def test_the_browser_check_sees_requests_and_errors(tmp_path: Path) -> None:
    """The control: a page that fetches and logs an error is caught (so an empty list above means something)."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<html><body><img src='http://127.0.0.1:9/x.png'><script>console.error('boom')</script></body></html>"
    )
    load = load_page(page)
    assert load.requests == ["http://127.0.0.1:9/x.png"]
    assert "boom" in load.errors
