"""The key-state reads of one poll, done before its records are normalized.

The upsert-kafka source reads the stored row of every key in a poll up front
(:meth:`PrefetchedReads.prefetch`), so that the previous rows it has to decode (to compare an
update, to emit a ``-D``) are decoded together, by the value format's batch decoder, instead of
one by one. :class:`PrefetchedReads` is the store the source's
:class:`~changelake.changelog.normalize.ChangelogNormalize` works on: ``get`` answers a prefetched
key once, from the read done before the poll, until the key is written (``put`` / ``delete``
drop it), and asks the store itself otherwise, so every read sees the same bytes as without the
prefetch and no key is read twice.
"""

from __future__ import annotations

from typing import Iterator

from changelake.changelog.state import KeyStateStore

__all__ = ["PrefetchedReads"]

_MISSING = object()


class PrefetchedReads(KeyStateStore):
    """A :class:`KeyStateStore` over ``store`` whose reads of the current poll were done ahead.

    Writes, metadata, commit and close go to ``store`` unchanged. :meth:`clear` forgets the
    prefetched reads (the source calls it when a poll ends, also on error)."""

    def __init__(self, store: KeyStateStore) -> None:
        self.store = store
        self._read: dict[bytes, bytes | None] = {}

    def prefetch(self, key: bytes) -> bytes | None:
        """Read ``key`` now (once per poll: a key read before is answered from the first read)
        and keep the value for the next :meth:`get` of it."""
        read = self._read
        if key in read:
            return read[key]
        value = read[key] = self.store.get(key)
        return value

    def clear(self) -> None:
        self._read.clear()

    def get(self, key: bytes) -> bytes | None:
        value = self._read.pop(key, _MISSING)
        return self.store.get(key) if value is _MISSING else value  # type: ignore[return-value]

    def put(self, key: bytes, value: bytes) -> None:
        self._read.pop(key, None)
        self.store.put(key, value)

    def delete(self, key: bytes) -> None:
        self._read.pop(key, None)
        self.store.delete(key)

    def get_meta(self, name: str) -> bytes | None:
        return self.store.get_meta(name)

    def put_meta(self, name: str, value: bytes) -> None:
        self.store.put_meta(name, value)

    def meta_items(self, prefix: str = "") -> list[tuple[str, bytes]]:
        return self.store.meta_items(prefix)

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        return self.store.items()

    def commit(self) -> None:
        self.store.commit()

    def close(self) -> None:
        self.clear()
        self.store.close()

    def __len__(self) -> int:
        return len(self.store)
