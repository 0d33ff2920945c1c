"""Export formats other than the tape: har, mermaid, html (filled in by the inspection work)."""

from __future__ import annotations

from pathlib import Path

from .app import fail

FORMATS = ("jsonl",)


def export(*, task: str | None, all_: bool, format: str, output: Path | None, db: str | None) -> None:
    fail(f"unknown export format '{format}' (known: {', '.join(FORMATS)})")
