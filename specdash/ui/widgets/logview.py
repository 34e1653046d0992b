"""The live server log: a bounded ring of cleaned lines, rendered a screen at a time.

A `ScrollView` with `render_line` rather than `RichLog`: a batch of 2,500 lines only costs cleaning and a
deque append per line, and only the ~40 visible lines are ever styled (RichLog renders every line it is
given). The full log stays on the host; this keeps the last `max_lines`, and errors a while longer.

A progress bar's redraws fold into one line that updates in place (`core.bars.bar_line` says which bar a
line draws), as a terminal shows a tqdm bar; the raw lines stay in the log on the host (`specdash logs`).
Long lines scroll sideways, or wrap (`wrap`); timestamps can be hidden (`timestamps`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Iterable
from dataclasses import replace
from itertools import accumulate

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import on
from textual.binding import Binding
from textual.cache import LRUCache
from textual.events import MouseScrollDown, MouseScrollUp
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from specdash.core.bars import bar_line, tag_only
from specdash.core.startup_events import ClassifiedLine
from specdash.ui.messages import LogLines
from specdash.ui.widgets.loglines import (
    Kind,
    LogLine,
    level_spans,
    match_spans,
    prefix_span,
    rank_spans,
    timestamp_span,
    view_line,
)

MAX_LINES = 5_000
"""Lines kept in view; at 10,000 lines/s that is the last half second, at a normal startup all of it."""
MAX_LINE_CHARS = 4_096
"""Characters kept of one line: a line without a break arrives in 256 KiB pieces, and 5,000 of those would
hold over a gigabyte. The rest is counted on screen; the whole line stays in the log on the host."""

_KIND_CLASS = {
    Kind.READY: "log-view--ready",
    Kind.WARNING: "log-view--warning",
    Kind.ERROR: "log-view--error",
    Kind.TRACEBACK: "log-view--traceback",
}


class LogView(ScrollView, can_focus=True):
    """A tail of the server log with follow, an errors-only filter, search and a marked line."""

    BINDINGS = [
        Binding(
            "enter",
            "screen.zoom",
            "Zoom",
            id="log-zoom",
            tooltip="Show the log on the whole screen, or back",
            show=False,
        ),
    ]

    COMPONENT_CLASSES = {
        "log-view--ready",
        "log-view--warning",
        "log-view--error",
        "log-view--traceback",
        "log-view--rank",
        "log-view--prefix",
        "log-view--level-error",
        "log-view--level-warning",
        "log-view--match",
        "log-view--marked",
        "log-view--placeholder",
    }

    DEFAULT_CSS = """
    LogView {
        background: $surface;
        overflow: auto auto;
        & > .log-view--ready { color: $success; text-style: bold; }
        & > .log-view--warning { color: $warning; }
        & > .log-view--error { color: $error; }
        & > .log-view--traceback { color: $error-lighten-1; }
        & > .log-view--rank { color: $accent; text-style: bold; }
        & > .log-view--prefix { color: $text-muted; }
        & > .log-view--level-error { color: $text-error; background: $error-muted; text-style: bold; }
        & > .log-view--level-warning { color: $text-warning; background: $warning-muted; text-style: bold; }
        & > .log-view--match { color: $text; background: $warning-muted; text-style: bold underline; }
        & > .log-view--marked { background: $primary 45%; text-style: bold; }
        & > .log-view--placeholder { color: $text-muted; text-style: italic; }
    }
    """

    follow: reactive[bool] = reactive(True, init=False)
    """Keep the newest line in view as lines arrive (paused by scrolling up, a search or a crash jump)."""

    errors_only: reactive[bool] = reactive(False, init=False)
    """Show only errors, warnings and tracebacks."""

    needle: reactive[str] = reactive("", init=False)
    """The search text, highlighted in every visible line (case-insensitive)."""

    wrap: reactive[bool] = reactive(False, init=False)
    """Wrap long lines to the view's width instead of scrolling sideways."""

    timestamps: reactive[bool] = reactive(True, init=False)
    """Show the timestamps at the start of lines (hidden, a line's message starts 20 columns earlier)."""

    def __init__(self, *, max_lines: int = MAX_LINES, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self._seq = 0
        """The number of the last line taken (a line's identity in the view's caches)."""
        self._all: deque[LogLine] = deque(maxlen=max_lines)
        self._errors: deque[LogLine] = deque(maxlen=max_lines)
        self._width = 0
        self._marked: LogLine | None = None
        self._cache: LRUCache[tuple[int, bool, bool, bool], Strip] = LRUCache(1024)
        self._bars: dict[str, tuple[LogLine, int]] = {}
        """Bar key -> (the line that shows the bar, steps done at its last redraw)."""
        self.folded = 0
        """Bar redraws folded into the line before them (the raw lines are in the log on the host)."""
        self._row_starts: list[int] | None = None
        """Wrapped: the first screen row of each shown line (None: to be recomputed)."""
        self._wrap_width = 0
        self._tag: ClassifiedLine | None = None
        """A line that is only a process tag, held to see whether a bar follows it (`_with_tags`)."""

    # ------------------------------------------------------------------------------------------- data

    @property
    def shown(self) -> deque[LogLine]:
        """The lines in view now (all, or the errors-only subset)."""
        return self._errors if self.errors_only else self._all

    @property
    def marked(self) -> LogLine | None:
        """The line a search or a crash jump landed on."""
        return self._marked

    def clear(self) -> None:
        """Forget every line (a new run starts)."""
        self._all.clear()
        self._errors.clear()
        self._marked = None
        self._width = 0
        self._bars.clear()
        self.folded = 0
        self._row_starts = None
        self._cache.clear()
        self._tag = None
        self.virtual_size = Size(0, 0)
        self.scroll_to(0, 0, animate=False, immediate=True)
        self.refresh()

    def append(self, entries: Iterable[ClassifiedLine]) -> None:
        """Add a batch in one go (one refresh per batch, never per line): lines the session's tracker read."""
        before = len(self.shown)
        width, added_all, added_errors = self._width, 0, 0
        error_kinds = (Kind.WARNING, Kind.ERROR, Kind.TRACEBACK)
        for entry in self._with_tags(entries):
            self._seq += 1
            line, length = view_line(self._seq, entry), len(entry.text)
            if length > MAX_LINE_CHARS:
                cut = length - MAX_LINE_CHARS
                line.text = f"{line.text[:MAX_LINE_CHARS]} … [{cut:,} more characters in the log on the host]"
            if self._fold(line):
                width = max(width, len(line.text))
                continue
            self._all.append(line)
            added_all += 1
            if line.kind in error_kinds:
                self._errors.append(line)
                added_errors += 1
            if len(line.text) > width:
                width = len(line.text)
        self._width = width
        added = added_errors if self.errors_only else added_all
        dropped = max(0, before + added - (self.shown.maxlen or 0))
        if dropped and not self.follow and not self.wrap:
            # Lines fell off the front: move up with the content so the reader's place stays put.
            self.scroll_to(y=max(0, self.scroll_offset.y - dropped), animate=False, immediate=True)
        self._row_starts = None
        self._resize_virtual()
        if self.follow:
            # Now (the virtual size is known), and again after the refresh, unless the reader paused meanwhile.
            # The first batch that overflows the view also brings the scrollbar, and until the layout has shown
            # it the view cannot scroll at all: `watch_show_vertical_scrollbar` goes to the end once it can.
            self.scroll_end(animate=False, immediate=True, x_axis=False)
            self.call_after_refresh(self._to_end_if_following)
        self.refresh()

    def _with_tags(self, entries: Iterable[ClassifiedLine]) -> Iterable[ClassifiedLine]:
        """`entries` with a tag-only line put in front of the bar that follows it (one line, as a terminal
        shows it). A tag-only line before anything else is an empty write (tqdm's closing newline): it says
        nothing and is counted with the bar redraws. One at the end of a batch waits for the next batch."""
        for entry in entries:
            tag, self._tag = self._tag, None
            if tag is not None:
                if bar_line(entry.text) is not None:
                    yield replace(entry, text=f"{tag.text.strip()} {entry.text}")
                    continue
                self.folded += 1
            if tag_only(entry.text):
                self._tag = entry
            else:
                yield entry

    @on(LogLines)
    def _log_lines(self, message: LogLines) -> None:
        for batch in message.mailbox.take():
            if batch.reset:
                self.clear()
            self.append(batch.lines)
        if message.mailbox.pending:  # a long backlog: the rest after whatever else is waiting
            self.post_message(LogLines(message.mailbox))

    def _fold(self, line: LogLine) -> bool:
        """True when `line` redraws a bar already in view: that line takes its text, and `line` goes."""
        bar = bar_line(line.text)
        if bar is None:
            return False
        shown = self._bars.get(bar.key)
        oldest = self._all[0].seq if self._all else line.seq
        if shown is None or shown[0].seq < oldest or bar.done < shown[1]:
            # A new bar (or the same description counting again: the draft model's shards after the target's).
            self._bars[bar.key] = (line, bar.done)
            return False
        target = shown[0]
        target.text = line.text
        self._bars[bar.key] = (target, bar.done)
        self.folded += 1
        for marked in (False, True):
            for errors in (False, True):
                for stamps in (False, True):
                    self._cache.discard((target.seq, marked, errors, stamps))
        self._row_starts = None
        return True

    def _resize_virtual(self) -> None:
        if self.wrap:
            starts = self._wrapped_rows()
            self.virtual_size = Size(self._wrap_width, starts[-1] if starts else 0)
        else:
            self.virtual_size = Size(self._width + 1, len(self.shown))

    def _shown_text(self, line: LogLine) -> str:
        if self.timestamps:
            return line.text
        span = timestamp_span(line.text)
        return line.text if span is None else line.text[: span[0]] + line.text[span[1] :]

    def _wrapped_rows(self) -> list[int]:
        """Row starts of every shown line when wrapped, with the total at the end (recomputed lazily)."""
        width = max(1, self.scrollable_content_region.width)
        if self._row_starts is None or width != self._wrap_width:
            self._wrap_width = width
            heights = (max(1, -(-cell_len(self._shown_text(line)) // width)) for line in self.shown)
            self._row_starts = [0, *accumulate(heights)]
        return self._row_starts

    def _row_of(self, index: int) -> int:
        """The first screen row of the `index`-th shown line."""
        return self._wrapped_rows()[index] if self.wrap else index

    def find(self, needle: str, *, forward: bool, start: LogLine | None = None) -> LogLine | None:
        """The next line (after `start`, or from the end going back) containing `needle`, wrapping."""
        shown, low = list(self.shown), needle.lower()
        if not shown or not low:
            return None
        n = len(shown)
        origin = self.index_of(start) if start is not None else None
        if origin is None:
            origin = -1 if forward else n
        for step in range(1, n + 1):
            i = (origin + step) % n if forward else (origin - step) % n
            if low in shown[i].text.lower():
                return shown[i]
        return None

    def find_text(self, text: str) -> LogLine | None:
        """The newest line in the whole ring that contains `text` (e.g. the crash's exception line)."""
        for line in reversed(self._all):
            if text in line.text:
                return line
        return None

    def index_of(self, line: LogLine) -> int | None:
        """Where `line` is in the shown lines, if it is still there."""
        for i in range(len(self.shown) - 1, -1, -1):
            if self.shown[i] is line:
                return i
        return None

    def jump_to(self, line: LogLine) -> bool:
        """Mark `line`, pause following and centre it; False when it is not in view (filtered or dropped)."""
        index = self.index_of(line)
        if index is None:
            return False
        self._marked = line
        self._cache.clear()
        self.follow = False
        self.scroll_to(y=max(0, self._row_of(index) - self.size.height // 2), animate=False, immediate=True)
        self.refresh()
        return True

    # ------------------------------------------------------------------------------------------ watchers

    def watch_follow(self, follow: bool) -> None:
        if follow:
            self._marked = None
            self._cache.clear()
            self.scroll_end(animate=False, immediate=True, x_axis=False)
            self.refresh()

    def watch_errors_only(self) -> None:
        self._cache.clear()
        self._row_starts = None
        self._resize_virtual()
        if self.follow or self._marked is None or not self.jump_to(self._marked):
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        self.refresh()

    def watch_needle(self) -> None:
        self._cache.clear()
        self.refresh()

    def _relayout(self) -> None:
        # Keep the reader's line in view across a change of how lines are laid out.
        top = self._line_at(self.scroll_offset.y)
        self._cache.clear()
        self._row_starts = None
        self._resize_virtual()
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        elif top is not None:
            self.scroll_to(0, self._row_of(top[0]), animate=False, immediate=True)
        self.refresh()

    def watch_wrap(self) -> None:
        self._relayout()

    def watch_timestamps(self) -> None:
        self._relayout()

    def on_resize(self) -> None:
        if self.wrap:
            self._resize_virtual()
        if self.follow:
            # The layout changes with the terminal's size class: the end moves with it.
            self.scroll_end(animate=False, x_axis=False)
            self.call_after_refresh(self._to_end_if_following)

    def _to_end_if_following(self) -> None:
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    # A scrollbar appearing (or going) moves the end: the layout settled it, so follow from there. Textual
    # allows no vertical scroll before the vertical scrollbar is shown, so a scroll to the end asked for in
    # the same turn as the lines that overflow the view would do nothing; this is the event that makes it.

    def watch_show_vertical_scrollbar(self) -> None:
        self._to_end_if_following()

    def watch_show_horizontal_scrollbar(self) -> None:
        self._to_end_if_following()

    def on_mouse_scroll_up(self, _event: MouseScrollUp) -> None:
        # Reading back through the log: stop dragging the view to the bottom under the reader's eyes.
        self.follow = False

    def action_scroll_up(self) -> None:
        self.follow = False
        super().action_scroll_up()

    def action_page_up(self) -> None:
        self.follow = False
        super().action_page_up()

    def action_scroll_home(self) -> None:
        self.follow = False
        super().action_scroll_home()

    # Back at the newest line: follow again, as `less +F` and `tail -f` viewers do.

    def _follow_if_at_end(self) -> None:
        if not self.follow and self.shown and self.scroll_target_y >= self.max_scroll_y:
            self.follow = True

    def on_mouse_scroll_down(self, _event: MouseScrollDown) -> None:
        self._follow_if_at_end()

    def action_scroll_down(self) -> None:
        super().action_scroll_down()
        self._follow_if_at_end()

    def action_page_down(self) -> None:
        super().action_page_down()
        self._follow_if_at_end()

    def action_scroll_end(self) -> None:
        super().action_scroll_end()
        self.follow = True

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    # ----------------------------------------------------------------------------------------- rendering

    def _line_at(self, row: int) -> tuple[int, int] | None:
        """(index of the shown line, which of its wrapped rows) at screen row `row` of the content."""
        if not self.wrap:
            return (row, 0) if row < len(self.shown) else None
        starts = self._wrapped_rows()
        if row >= starts[-1]:
            return None
        index = bisect_right(starts, row) - 1
        return index, row - starts[index]

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        base = self.rich_style
        at = self._line_at(scroll_y + y)
        if at is None:
            if scroll_y + y == 0:
                return self._placeholder(width, base)
            return Strip.blank(width, base)
        index, part = at
        line = self.shown[index]
        key = (line.seq, line is self._marked, self.errors_only, self.timestamps)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._line_strip(line, base)
            self._cache[key] = strip
        if self.wrap:
            start = part * self._wrap_width
            return strip.crop_extend(start, start + width, base)
        return strip.crop_extend(scroll_x, scroll_x + width, base)

    def _placeholder(self, width: int, base: Style) -> Strip:
        # An empty view should say why, rather than look like a stalled stream.
        if self.errors_only and self._all:
            message = f"no errors or warnings in the last {len(self._all):,} lines (e: show all)"
        else:
            message = "no server log yet"
        text = Text(message, no_wrap=True, end="")
        text.stylize(base)
        text.stylize(self._blended("log-view--placeholder"))
        return Strip(text.render(self.app.console), text.cell_len).crop_extend(0, width, base)

    def _blended(self, name: str) -> Style:
        # Muted colours are translucent ($text-muted): only the full style blends them over the background.
        return self.get_component_rich_style(name)

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(name, partial=True)

    def _line_strip(self, line: LogLine, base: Style) -> Strip:
        text = Text(line.text, no_wrap=True, end="")
        text.stylize(base)
        if line.kind in _KIND_CLASS:
            text.stylize(self._style(_KIND_CLASS[line.kind]))
        prefix = prefix_span(line.text)
        if prefix is not None and line.kind is Kind.NORMAL:
            text.stylize(self._blended("log-view--prefix"), *prefix)
        for start, end in rank_spans(line.text):
            text.stylize(self._style("log-view--rank"), start, end)
        for start, end, is_error in level_spans(line.text):
            text.stylize(self._style("log-view--level-error" if is_error else "log-view--level-warning"), start, end)
        for start, end in match_spans(line.text, self.needle):
            text.stylize(self._style("log-view--match"), start, end)
        if line is self._marked:
            text.stylize(self._style("log-view--marked"))
        if not self.timestamps and (span := timestamp_span(line.text)) is not None:
            text = Text.assemble(text[: span[0]], text[span[1] :], no_wrap=True, end="")
        return Strip(text.render(self.app.console), text.cell_len)
