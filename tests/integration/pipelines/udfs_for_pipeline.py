"""UDFs a real pipeline registers in ``pipeline.user-defined-function`` (by dotted path)."""

import pyarrow as pa
import pyarrow.compute as pc

from changelake.changelog.expressions import vectorized


def with_tax(price):
    """A scalar UDF: the price with 20% tax, rounded to cents (DECIMAL(12, 2))."""
    from decimal import ROUND_HALF_UP, Decimal

    return None if price is None else (price * Decimal("1.2")).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


with_tax.return_type = "DECIMAL(12, 2)"


@vectorized(return_type="STRING")
def shout(names: pa.Array) -> pa.Array:
    """A vectorised UDF: the upper-cased name with '!' (one call per batch)."""
    return pc.binary_join_element_wise(pc.utf8_upper(names), pa.scalar("!"), "")
