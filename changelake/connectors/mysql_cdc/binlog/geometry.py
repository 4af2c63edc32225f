"""MySQL GEOMETRY values as Flink CDC's MySQL connector renders them (a GeoJSON-like string).

MySQL and MariaDB store a geometry as a 4-byte little-endian SRID followed by OGC WKB; both the
snapshot (text protocol) and the binlog hand over exactly those bytes. Flink CDC turns the WKB into
GeoJSON and adds the SRID: ``{"coordinates":[1.0,2.0],"type":"Point","srid":0}``
(``GeometryCollection`` carries ``geometries`` instead of ``coordinates``).
"""

from __future__ import annotations

import json
import struct
from typing import Any

__all__ = ["geometry_to_json", "parse_wkb"]

_TYPES = {1: "Point", 2: "LineString", 3: "Polygon", 4: "MultiPoint", 5: "MultiLineString", 6: "MultiPolygon", 7: "GeometryCollection"}


class _Reader:
    def __init__(self, data: bytes, offset: int = 0) -> None:
        self.data, self.offset = data, offset

    def unpack(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from(fmt, self.data, self.offset)
        self.offset += struct.calcsize(fmt)
        return values


def _geometry(r: _Reader) -> dict[str, Any]:
    (order,) = r.unpack("B")
    e = "<" if order == 1 else ">"
    (code,) = r.unpack(e + "I")
    code %= 1000  # ISO WKB Z/M variants are not produced by MySQL; keep the 2D base type
    kind = _TYPES.get(code)
    if kind is None:
        raise ValueError(f"unknown WKB geometry type {code}")

    def point() -> list[float]:
        x, y = r.unpack(e + "dd")
        return [x, y]

    def points() -> list[list[float]]:
        (n,) = r.unpack(e + "I")
        return [point() for _ in range(n)]

    def rings() -> list[list[list[float]]]:
        (n,) = r.unpack(e + "I")
        return [points() for _ in range(n)]

    if kind == "Point":
        return {"type": kind, "coordinates": point()}
    if kind == "LineString":
        return {"type": kind, "coordinates": points()}
    if kind == "Polygon":
        return {"type": kind, "coordinates": rings()}
    (count,) = r.unpack(e + "I")
    parts = [_geometry(r) for _ in range(count)]
    if kind == "GeometryCollection":
        return {"type": kind, "geometries": parts}
    return {"type": kind, "coordinates": [p["coordinates"] for p in parts]}


def parse_wkb(wkb: bytes) -> dict[str, Any]:
    """Parse OGC WKB (2D) into a GeoJSON dict. Raises ValueError / struct.error on bad input."""
    return _geometry(_Reader(wkb))


def geometry_to_json(value: bytes) -> str:
    """MySQL internal geometry bytes (SRID + WKB) -> compact GeoJSON-like text with ``srid``."""
    if len(value) < 9:
        raise ValueError(f"geometry value too short ({len(value)} bytes)")
    (srid,) = struct.unpack_from("<I", value, 0)
    geo = parse_wkb(value[4:])
    body_key = "geometries" if geo["type"] == "GeometryCollection" else "coordinates"
    out = {body_key: geo[body_key], "type": geo["type"], "srid": srid}
    return json.dumps(out, separators=(",", ":"))
