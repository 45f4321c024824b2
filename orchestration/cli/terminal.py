"""What a command prints while it works: progress lines as `seams: ...`."""

from __future__ import annotations


def say(message: str) -> None:
    """One progress line on stdout, flushed at once (a long run reports as it goes)."""
    print(f"seams: {message}", flush=True)
