"""The one TIME formatter of the engine: ``[-]HH:mm:ss[.f]``, as Flink's JSON format writes a TIME
and as ``CAST(time AS STRING)`` prints one. It sits in ``changelog`` (the bottom package) so that
the formats, the lakes (through :mod:`changelake.formats.json_values`) and the expression
evaluator all use it."""

from __future__ import annotations

import datetime as dt

__all__ = ["format_time", "fraction"]


def fraction(microseconds: int, precision: int | None = None) -> str:
    """The fractional-second part of a time: ``""`` or ``.`` plus digits.

    Args:
        microseconds: 0..999999.
        precision: digits to print (0..6, beyond 6 taken as 6; extra digits truncated, not
            rounded). ``None`` prints the microseconds with trailing zeros removed, nothing for 0.
    """
    if precision is None:
        return f".{microseconds:06d}".rstrip("0") if microseconds else ""
    digits = f"{microseconds:06d}"[: max(0, min(precision, 6))]
    return f".{digits}" if digits else ""


def format_time(value: dt.timedelta | dt.time, precision: int | None = None) -> str:
    """``[-]HH:mm:ss[.f]`` of a MySQL TIME (timedelta; may be negative or > 24 h) or a ``time``,
    as Flink's JSON format writes it.

    Args:
        value: the signed duration since midnight, or a time of day.
        precision: fractional-second digits (0..6). ``None`` prints the microseconds with trailing
            zeros removed, and nothing when they are 0. Digits beyond ``precision`` are truncated.

    Examples: ``timedelta(seconds=-1.5)`` -> ``-00:00:01.5``; 838:59:59 -> ``838:59:59``;
    ``format_time(timedelta(microseconds=500_000), 3)`` -> ``00:00:00.500``.
    """
    if isinstance(value, dt.time):
        sign, hours, minute, sec, micros = "", value.hour, value.minute, value.second, value.microsecond
    else:
        total = value // dt.timedelta(microseconds=1)
        sign = "-" if total < 0 else ""
        seconds, micros = divmod(abs(total), 1_000_000)
        minutes, sec = divmod(seconds, 60)
        hours, minute = divmod(minutes, 60)
    return f"{sign}{hours:02d}:{minute:02d}:{sec:02d}{fraction(micros, precision)}"
