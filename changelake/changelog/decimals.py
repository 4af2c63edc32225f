"""DECIMAL(p, s) arithmetic that never rounds past the column: one home for the decimal context.

Python's ``decimal`` module works under a thread context of 28 significant digits by default, and
``quantize``, ``scaleb``, ``+``, ``-`` and unary minus round (or signal) to it. DECIMAL(38, s), the
widest DECIMAL of Flink and of Iceberg and Paimon, needs 38, and sums over it up to 38 too
(Flink's SUM(DECIMAL(p, s)) is DECIMAL(38, s)). The functions here use their own contexts, never
the thread's, so a wide value is kept exactly or refused, never silently rounded.
"""

from __future__ import annotations

import functools
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation

__all__ = ["column_context", "quantize", "from_unscaled", "ARITHMETIC"]

#: The context of sums and differences of DECIMAL values (SUM, retractions): 80 digits, far past
#: DECIMAL(38, s)'s sums, so they stay exact; the sink's quantize refuses what does not fit.
ARITHMETIC = Context(prec=80, rounding=ROUND_HALF_UP)


@functools.lru_cache(maxsize=None)
def column_context(precision: int) -> Context:
    """The context of a DECIMAL(``precision``, s) column: ROUND_HALF_UP (as Flink's DecimalData)
    and ``precision`` significant digits, so ``quantize`` under it signals ``InvalidOperation``
    exactly when the value rounded to the scale has more digits than the column holds."""
    return Context(prec=precision, rounding=ROUND_HALF_UP, traps=[InvalidOperation])


def quantize(value: Decimal, precision: int, scale: int) -> Decimal:
    """``value`` rounded HALF_UP to ``scale`` fraction digits (as Flink's ``DecimalData.fromBigDecimal``).

    Raises:
        ValueError: the rounded value has more than ``precision`` digits, or ``value`` is NaN or
            infinite (names the value and the type).
    """
    if not value.is_finite():
        raise ValueError(f"DECIMAL cannot hold {value}")
    try:
        return value.quantize(Decimal(1).scaleb(-scale), context=column_context(precision))
    except InvalidOperation:
        raise ValueError(f"{value} does not fit DECIMAL({precision}, {scale})") from None


def from_unscaled(unscaled: int, scale: int) -> Decimal:
    """The exact Decimal ``unscaled × 10^-scale`` (Avro's and Kafka Connect's decimal encoding),
    with no rounding whatever its number of digits."""
    sign = 1 if unscaled < 0 else 0
    return Decimal((sign, tuple(int(c) for c in str(abs(unscaled))), -scale))
