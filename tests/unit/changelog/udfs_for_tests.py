"""User-defined functions the transform tests register by dotted path."""

import pyarrow as pa
import pyarrow.compute as pc

from changelake.changelog.expressions import vectorized


def add_one(x):
    return None if x is None else x + 1


add_one.return_type = "INT"


def greet(name, fmt):
    return fmt.replace("%s", name or "?")


@vectorized(return_type="BIGINT")
def times_ten(values: pa.Array) -> pa.Array:
    return pc.multiply(values.cast(pa.int64()), 10)


class Prefix:
    """A Flink-style UDF class: no-arg constructor, open(), eval(), get_return_type()."""

    def __init__(self):
        self.prefix = None

    def open(self):
        self.prefix = "p:"

    def eval(self, value):
        return self.prefix + str(value)

    def get_return_type(self):
        return "STRING"


def broken(x):
    raise RuntimeError("boom")
