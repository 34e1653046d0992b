"""The GPU panel: utilisation, memory and power per GPU; hidden until the first `nvidia-smi` poll."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from specdash.core.events import GpuSample, GpuStats
from specdash.ui.format import bar

TWO_COLUMNS_ABOVE = 4
"""More GPUs than this share lines, two per line: an 8-GPU box fits the panel at 100x30."""
MIN_CELL = 15
"""The narrowest a GPU's compact line can be: "0 ", a 3-cell bar and " 100% 79G"; two GPUs per line need twice
that, else the panel shows the summary."""
COMPACT_BELOW = 36
"""Narrower than this, a GPU's line drops the memory total and the power."""


LEVELS = "▁▂▃▄▅▆▇█"
"""A GPU's utilisation as one character of the summary line, idle to full (an idle GPU is still a visible cell)."""


def _span(values: list[float], fmt: str) -> str:
    low, high = min(values), max(values)
    return fmt.format(low) if fmt.format(low) == fmt.format(high) else f"{fmt.format(low)}-{fmt.format(high)}"


def gpu_summary(gpus: tuple[GpuSample, ...], width: int | None = None, *, label: bool = True) -> str:
    """Every GPU in a few words: a block per GPU by utilisation, then the spread of utilisation, memory and power
    across them (`GPUs ▇▇▇▁ 0-90% 59.6-61.9/80G 310-331W`): an idle or lagging GPU stands out without a line
    of its own. With `width`, the words go on as many lines of that width as they need; `label=False` leaves out
    the leading "GPUs" (a panel whose border says it already)."""
    if not gpus:
        return ""
    blocks = "".join(LEVELS[min(len(LEVELS) - 1, round(g.util_pct / 100 * (len(LEVELS) - 1)))] for g in gpus)
    util = _span([g.util_pct for g in gpus], "{:.0f}") + "%"
    mem = _span([g.mem_used_mib / 1024 for g in gpus], "{:.1f}") + f"/{max(g.mem_total_mib for g in gpus) / 1024:.0f}G"
    watts = [g.power_w for g in gpus if g.power_w is not None]
    words = (["GPUs"] if label else []) + [blocks, util, mem] + ([f"{_span(watts, '{:.0f}')}W"] if watts else [])
    lines = [words[0]]
    for word in words[1:]:
        if width is not None and len(lines[-1]) + 1 + len(word) > width:
            lines.append(word)
        else:
            lines[-1] += " " + word
    return "\n".join(lines)


def gpu_line(gpu: GpuSample, bar_width: int, *, compact: bool = False) -> tuple[str, str, str, str]:
    """(label, filled bar, empty bar, figures) for one GPU; `compact` drops the memory total and power."""
    filled, empty = bar(gpu.util_pct / 100, bar_width)
    if compact:
        return f"{gpu.index} ", filled, empty, f" {gpu.util_pct:3.0f}% {gpu.mem_used_mib / 1024:.0f}G"
    mem = f"{gpu.mem_used_mib / 1024:.1f}/{gpu.mem_total_mib / 1024:.0f}G"
    power = "" if gpu.power_w is None else f" {gpu.power_w:.0f}W"
    return f"GPU{gpu.index} ", filled, empty, f" {gpu.util_pct:3.0f}% {mem}{power}"


class GpuPanel(Static):
    """One line per GPU (two GPUs per line on boxes with more than four), or all of them on one line
    (`summary`: the panel docked under the stacked sweep page, where the charts need the rows)."""

    COMPONENT_CLASSES = {"gpu-panel--bar", "gpu-panel--empty"}

    DEFAULT_CSS = """
    GpuPanel {
        display: none;
        &.-polled { display: block; }
        & > .gpu-panel--bar { color: $accent; }
        & > .gpu-panel--empty { color: $panel-lighten-2; }
    }
    """

    stats: reactive[GpuStats | None] = reactive(None)
    """The latest poll (None: never polled, so the panel stays hidden)."""

    def __init__(self, *, summary: bool = False, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.summary = summary

    def on_mount(self) -> None:
        self.border_title = "GPUs"

    def watch_stats(self, stats: GpuStats | None) -> None:
        # A class, not `display`: the layout's CSS decides where the panel goes once it has something to show.
        self.set_class(stats is not None and bool(stats.gpus), "-polled")

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        if self.stats is None:
            return text
        gpus = self.stats.gpus
        columns = 2 if len(gpus) > TWO_COLUMNS_ABOVE else 1
        if self.summary or (columns == 2 and (self.content_size.width - 2) // 2 < MIN_CELL):
            # Docked under a small sweep page, or too many GPUs to list in a narrow box (beside the modes at
            # 100 columns two per line would not fit, one per line would take the log's rows): the summary.
            text.append(gpu_summary(gpus, None if self.summary else self.content_size.width, label=self.summary))
            return text
        cell = (self.content_size.width - 2 * (columns - 1)) // columns
        # Leave room for "GPU0 " and " 100% 79.1/80G 700W" (compact: "0 " and " 100% 79G"); a narrow panel
        # (a strip above the log) gets the compact figures too, rather than lines that wrap.
        compact = columns == 2 or cell < COMPACT_BELOW
        # The bar gets what the widest label and figures leave (a 141 GiB H200 says "112G", one more cell than
        # "79G": a fixed allowance let such lines run past the panel and wrap into each other).
        shapes = [gpu_line(gpu, 0, compact=compact) for gpu in gpus]
        width = max(3, cell - max(len(label) for label, *_ in shapes) - max(len(f) for *_, f in shapes))
        for i, gpu in enumerate(gpus):
            label, filled, empty, figures = gpu_line(gpu, width, compact=compact)
            if i:
                text.append("  " if i % columns else "\n")
            text.append(label)
            text.append(filled, self.get_component_rich_style("gpu-panel--bar"))
            text.append(empty, self.get_component_rich_style("gpu-panel--empty"))
            text.append(figures.ljust(cell - len(label) - width) if i % columns == 0 and columns == 2 else figures)
        return text
