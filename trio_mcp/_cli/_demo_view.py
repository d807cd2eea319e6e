"""What ``trio-mcp demo`` shows: the board of every task, as plain lines or a live table.

The :class:`Board` holds the state (both agents' tasks and the story so far)
and is fed the events of :mod:`._demo_scenario`. The plain view prints one
line per change; :class:`RichView` redraws a table and the last lines of the
story, fitted to the terminal's size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, final

import attrs
import trio

from ..peer._messages import TaskStatus
from ._demo_scenario import Event

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live


@final
@attrs.define(eq=False)
class Row:
    """One task on the board."""

    host: str
    task_id: str
    label: str
    status: str = TaskStatus.WORKING.value
    message: str | None = None
    progress: float | None = None
    total: float | None = None
    note: str | None = None
    duration: float | None = None


@final
class Board:
    """The state of the demo: every task of both agents and the story so far.

    Args:
        on_line: Called with a plain-text line for each change (the plain
            view prints them).
    """

    def __init__(self, on_line: Callable[[str], None] | None = None) -> None:
        self.rows: dict[tuple[str, str], Row] = {}
        self.log: list[str] = []
        self.started = trio.current_time()
        self.on_line = on_line

    def elapsed(self) -> float:
        """Seconds since the demo started."""
        return trio.current_time() - self.started

    def apply(self, event: Event) -> None:
        """Apply one event from an agent."""
        match event.get("op"):
            case "say":
                self._line(f"{event['who']}: {event['text']}", story=True)
            case "task":
                key = (event["host"], event["id"])
                row = self.rows.get(key)
                if row is None:
                    row = self.rows[key] = Row(event["host"], event["id"], event["label"])
                    self._line(f"{row.host} hosts task {row.task_id[:8]} ({row.label})")
                changed = row.status != event["status"] or row.message != event.get("message")
                row.status = event["status"]
                row.message = event.get("message")
                row.duration = event.get("duration")
                if changed:
                    note = f" — {row.message}" if row.message else ""
                    self._line(f"{row.host} task {row.task_id[:8]} {row.status}{note}")
            case "progress":
                row = self.rows.get((event["host"], event["id"]))
                if row is not None:
                    before = row.progress or 0.0
                    row.progress, row.total = event["progress"], event["total"]
                    row.note = event.get("message")
                    if not _worth_a_line(before, row.progress, row.total):
                        return
                    self._line(f"{row.host} task {row.task_id[:8]} progress "
                               f"{row.progress:g}/{row.total:g} {row.note or ''}".rstrip())

    def _line(self, text: str, *, story: bool = False) -> None:
        if story:
            self.log.append(text)
        if self.on_line is not None:
            self.on_line(f"[{self.elapsed():5.1f}s] {text}")


def _worth_a_line(before: float, now: float | None, total: float | None) -> bool:
    """Plain lines for every step of short tasks, every quarter of long ones."""
    if now is None or not total or total <= 10:
        return True
    return int(4 * now / total) != int(4 * before / total)


def _duration(row: Row) -> str:
    return "-" if row.duration is None else f"{row.duration:.1f}s"


def _plain_summary(board: Board, out: Any) -> None:
    rows = list(board.rows.values())
    print(f"\nSummary: {len(rows)} tasks on both agents", file=out)
    header = ("HOST", "TASK ID", "WHAT", "STATUS", "DURATION")
    table = [header] + [
        (f"{r.host}", r.task_id, r.label, r.status, _duration(r)) for r in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for line in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
              .rstrip(), file=out)


#: Consoles this wide (columns) or wider show the note column.
WIDE: Final = 100
#: Most story lines shown under the live table.
STORY_LINES: Final = 8

_STYLES: Final = {
    "working": "yellow",
    "input_required": "bold magenta",
    "completed": "green",
    "failed": "red",
    "cancelled": "dim",
}


@final
class RichView:
    """A live table of both agents' tasks and the last lines of the story.

    Args:
        board: What to show.
        console: Where.
        title: The table's title.
        era: A line naming the MCP era shown, under the table (none if empty).
    """

    def __init__(self, board: Board, console: Console, title: str, era: str = "") -> None:
        self.board = board
        self.console = console
        self.title = title
        self.era = era
        self._live: Live | None = None

    def _bar(self, row: Row, cells: int) -> str:
        if row.progress is None or not row.total:
            return ""
        filled = round(cells * min(1.0, row.progress / row.total))
        return f"{'█' * filled}{'░' * (cells - filled)} {row.progress:g}/{row.total:g}"

    def render(self, *, final: bool = False) -> RenderableType:
        """The table (and, while running, the story panel), fitted to the console.

        While running, every row and every story line takes one screen line
        (longer text ends with "…"; a status is never cut), narrower
        consoles (under :data:`WIDE` columns) drop the note column, and the
        story shows as many of its last lines as fit under the table in the
        console's height, so the frame never scrolls off screen.
        """
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text

        if final:
            summary = Table(title="Summary: every task on both agents",
                            caption=self.era or None, caption_justify="left")
            summary.add_column("host")
            summary.add_column("task id", no_wrap=True)
            summary.add_column("what")
            summary.add_column("status", no_wrap=True)
            summary.add_column("duration", no_wrap=True)
            for row in self.board.rows.values():
                summary.add_row(row.host, row.task_id, row.label,
                                f"[{_STYLES.get(row.status, '')}]{row.status}[/]",
                                _duration(row))
            return summary
        width, height = self.console.size
        wide = width >= WIDE
        bar = 10 if wide else 5
        fixed = {"host": 4, "task": 8, "status": len("input_required"),
                 "progress": bar + len(" 40/40")}
        columns = len(fixed) + (2 if wide else 1)
        free = max(10, width - sum(fixed.values()) - (3 * columns + 1))  # borders, padding
        sizes = {**fixed, "what": free * 3 // 5 if wide else free, "note": free - free * 3 // 5}
        caption = Text(self.era, no_wrap=True, overflow="ellipsis") if self.era else None
        table = Table(title=f"{self.title} — {self.board.elapsed():.1f}s", title_justify="left",
                      caption=caption, caption_justify="left")
        for name in ("host", "task", "what", "status", "progress", *(("note",) if wide else ())):
            table.add_column(name, width=sizes[name], no_wrap=True, overflow="ellipsis")
        for row in self.board.rows.values():
            cells = [row.host, row.task_id[:8], row.label,
                     f"[{_STYLES.get(row.status, '')}]{row.status}[/]",
                     self._bar(row, bar)]
            if wide:
                cells.append(row.message or row.note or "")
            table.add_row(*cells)
        # Title, top border, header, separator, rows, bottom border, the era
        # caption; then the panel's two borders, and the line the cursor rests on.
        room = height - (len(self.board.rows) + 5 + (1 if self.era else 0)) - 2 - 1
        if room < 1:
            return table
        story = Text("\n".join(self.board.log[-min(STORY_LINES, room):]) or "starting…",
                     no_wrap=True, overflow="ellipsis")
        return Group(table, Panel(story, title="story", title_align="left"))

    @contextmanager
    def pause(self) -> Iterator[None]:
        """Stop redrawing while a prompt is open."""
        live = self._live
        if live is None:
            yield
            return
        live.stop()
        try:
            yield
        finally:
            live.start()

    async def run(self) -> None:
        """Redraw until cancelled, then leave the last frame on screen."""
        from rich.live import Live

        with Live(self.render(), console=self.console, auto_refresh=False) as live:
            self._live = live
            try:
                while True:
                    live.update(self.render(), refresh=True)
                    await trio.sleep(0.1)
            finally:
                live.update(self.render(), refresh=True)
                self._live = None

    def summary(self) -> None:
        """Print the final table with full ids and durations."""
        self.console.print()
        self.console.print(self.render(final=True))
