"""Memo tables of the model's fast paths.

Decoded commands, register-derived op parameters, weight orders and the like are pure
functions of their keys (register values, stream bytes), so the model memoises them.  A
:class:`Memo` is a plain dict (lookups stay ``dict.get``) bounded in entries: ``put`` drops
the oldest entry when the table is full.  Caches with a byte budget as well (decoded weights,
epilogue tiles, fmap layouts) keep their own accounting.
"""
from __future__ import annotations

__all__ = ["Memo"]


class Memo(dict):
    """A dict of at most ``limit`` entries, filled through :meth:`put`."""
    __slots__ = ("limit",)

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def put(self, key, value):
        """Store value under key (dropping the oldest entry when full) and return it."""
        if key not in self and len(self) >= self.limit:
            del self[next(iter(self))]
        self[key] = value
        return value
