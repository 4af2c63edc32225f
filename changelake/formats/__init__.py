"""Formats: bytes <-> changelog rows, one module per format, identifiers spelled as Flink's.

(Filled in by the formats work; see ``FORMATS`` and ``create_format``.)
"""
