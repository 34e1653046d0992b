"""The GPU panel: utilisation, memory and power per GPU; hidden until the first `nvidia-smi` poll."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from specdash.core.events import GpuSample, GpuStats
from specdash.ui.format import bar


def gpu_line(gpu: GpuSample, bar_width: int) -> tuple[str, str, str, str]:
    """(label, filled bar, empty bar, figures) for one GPU."""
    filled, empty = bar(gpu.util_pct / 100, bar_width)
    mem = f"{gpu.mem_used_mib / 1024:.1f}/{gpu.mem_total_mib / 1024:.0f}G"
    power = "" if gpu.power_w is None else f" {gpu.power_w:.0f}W"
    return f"GPU{gpu.index} ", filled, empty, f" {gpu.util_pct:3.0f}% {mem}{power}"


class GpuPanel(Static):
    """One line per GPU."""

    COMPONENT_CLASSES = {"gpu-panel--bar", "gpu-panel--empty"}

    DEFAULT_CSS = """
    GpuPanel {
        & > .gpu-panel--bar { color: $accent; }
        & > .gpu-panel--empty { color: $panel-lighten-2; }
    }
    """

    stats: reactive[GpuStats | None] = reactive(None)
    """The latest poll (None: never polled, so the panel stays hidden)."""

    def on_mount(self) -> None:
        self.border_title = "GPUs"

    def watch_stats(self, stats: GpuStats | None) -> None:
        self.display = stats is not None and bool(stats.gpus)

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        if self.stats is None:
            return text
        # Leave room for "GPU0 " and " 100% 79.1/80G 700W".
        width = max(4, self.content_size.width - 26)
        for i, gpu in enumerate(self.stats.gpus):
            label, filled, empty, figures = gpu_line(gpu, width)
            text.append(("\n" if i else "") + label)
            text.append(filled, self.get_component_rich_style("gpu-panel--bar"))
            text.append(empty, self.get_component_rich_style("gpu-panel--empty"))
            text.append(figures)
        return text
