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

from ._demo_scenario import Event
from .peer._types import TaskStatus

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


_STYLES: Final = {
    "working": "yellow",
    "input_required": "bold magenta",
    "completed": "green",
    "failed": "red",
    "cancelled": "dim",
}


@final
class RichView:
    """A live table of both agents' tasks and the last lines of the story."""

    def __init__(self, board: Board, console: Console, title: str) -> None:
        self.board = board
        self.console = console
        self.title = title
        self._live: Live | None = None

    def _bar(self, row: Row) -> str:
        if row.progress is None or not row.total:
            return ""
        filled = round(10 * min(1.0, row.progress / row.total))
        return f"{'█' * filled}{'░' * (10 - filled)} {row.progress:g}/{row.total:g}"

    def render(self, *, final: bool = False) -> RenderableType:
        """The table (and, while running, the story panel)."""
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table

        if final:
            summary = Table(title="Summary: every task on both agents")
            summary.add_column("host")
            summary.add_column("task id", no_wrap=True)
            for column in ("what", "status", "duration"):
                summary.add_column(column)
            for row in self.board.rows.values():
                summary.add_row(row.host, row.task_id, row.label,
                                f"[{_STYLES.get(row.status, '')}]{row.status}[/]",
                                _duration(row))
            return summary
        table = Table(title=f"{self.title} — {self.board.elapsed():.1f}s")
        for column in ("host", "task", "what", "status", "progress", "note"):
            table.add_column(column)
        for row in self.board.rows.values():
            table.add_row(row.host, row.task_id[:8], row.label,
                          f"[{_STYLES.get(row.status, '')}]{row.status}[/]", self._bar(row),
                          row.message or row.note or "")
        story = "\n".join(self.board.log[-8:]) or "starting…"
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
