"""Reading the outcome of in-process Dagster runs for the command line."""

from __future__ import annotations

from typing import Any

__all__ = ["failure_messages"]


def failure_messages(result: Any) -> list[str]:
    """One line per failed step: the error the step's code raised (``ErrorClass: message``), not
    Dagster's wrapper ("Error occurred while executing op ..."). Empty when no step failed."""
    lines = []
    for event in result.all_events:
        if not event.is_step_failure:
            continue
        # Dagster wraps the op's exception ("Error occurred while executing op ..."): report the
        # first error raised by our code, whose message names what and where, not its causes.
        error = event.step_failure_data.error
        while error is not None and error.cls_name.startswith("Dagster") and error.cause is not None:
            error = error.cause
        if error is not None:
            message = error.message.strip()
            head, sep, rest = message.partition(": ")
            if sep and head.split(".")[-1] == error.cls_name:  # "pkg.mod.Error: text" -> "text"
                message = rest
            lines.append(f"{event.step_key}: {error.cls_name}: {message}")
    return lines
