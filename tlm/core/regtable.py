"""Register-table machinery shared by every device (device-neutral).

A device's register map is data: a tuple of `Register` words, each with its `Field`s, in
`Page`s (the Ethos-U85's: tlm/registers.py). From it derive, never retyped:

* `RegisterMap(registers)`: look-ups by name and offset and accessors by TRM name:
  ``REGS.STATUS.offset``, ``REGS["BASEP3_LO"].offset``, ``REGS.offset("QSIZE")``,
  ``REGS.STATUS.bus_status.mask`` / ``.lsb`` / ``.width`` / ``.get(word)`` / ``.put(word, v)``,
  ``REGS.CMD.encode(clear_irq=1)``, ``REGS.STATUS.decode(word)``; ``REGS.OFFSET`` (ident ->
  offset) and ``REGS.ident_of(offset)``;
* conventions: a wide register is several words with the same `name` and `word` 0, 1, ...
  (`ident` NAME_LO / NAME_HI); access classes ro/rw/wo (a field may override its
  register's); `reset_source` 'const' | 'config' | 'pins'; `behaviour` a hint for generators
  ('store', 'status', 'cmd', 'reset', 'set'/'clr' sharing a state, 'counter', 'mirror',
  'const').
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping

RO, RW, WO = "ro", "rw", "wo"


class BitSpan:
    """Bits lsb .. lsb + width - 1 of a word; every device's field table derives from it."""
    __slots__ = ()
    lsb: int
    width: int

    @property
    def msb(self) -> int:
        return self.lsb + self.width - 1

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.lsb

    def get(self, word: int) -> int:
        return (word >> self.lsb) & ((1 << self.width) - 1)


@dataclass(frozen=True)
class Field(BitSpan):
    name: str
    lsb: int
    width: int
    access: str = RW
    reset: "int | None" = 0
    enum: "str | None" = None        # key into ENUMS
    abbr: str = ""
    part_lsb: int = 0

    def put(self, word: int, value: int) -> int:
        return (word & ~self.mask) | ((value << self.lsb) & self.mask)


@dataclass(frozen=True)
class Page:
    name: str
    offset: int
    size: int
    description: str

    def contains(self, offset: int) -> bool:
        return self.offset <= offset < self.offset + self.size


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    page: str
    access: str
    reset: "int | None"
    fields: tuple
    description: str = ""
    word: "int | None" = None
    reset_source: str = "const"
    behaviour: str = "store"
    shared: str = ""                 # set/clr pairs: name of the shared state
    stopped_only: str = ""           # '' | 'rw' (any access UNPREDICTABLE in RUNNING) | 'w'

    @property
    def ident(self) -> str:
        if self.word is None:
            return self.name
        return f"{self.name}_{'LO' if self.word == 0 else 'HI'}"

    @property
    def width64(self) -> bool:
        return self.word is not None

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.ident} has no field {name!r}")

    def __getattr__(self, name: str) -> Field:
        """A field by TRM name: ``reg.bus_status`` (``field(name)``)."""
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self.field(name)
        except KeyError as e:
            raise AttributeError(str(e)) from None

    def mask(self, *access: str) -> int:
        """OR of the masks of the fields whose access class is in `access`."""
        m = 0
        for f in self.fields:
            if f.access in access:
                m |= f.mask
        return m

    @property
    def defined_mask(self) -> int:
        return self.mask(RO, RW, WO)

    @property
    def write_mask(self) -> int:
        """Bits a permitted write can change (0 for an ro register)."""
        return 0 if self.access == RO else self.mask(RW, WO)

    @property
    def read_mask(self) -> int:
        """Bits a permitted read can return non-zero (wo fields and wo registers read 0)."""
        return 0 if self.access == WO else self.mask(RO, RW)

    def decode(self, word: int) -> dict:
        return {f.name: f.get(word) for f in self.fields}

    def encode(self, **values) -> int:
        w = 0
        for k, v in values.items():
            w = self.field(k).put(w, v)
        return w

    def as_dict(self) -> dict:
        return {"name": self.name, "ident": self.ident, "offset": self.offset, "page": self.page,
                "access": self.access, "reset": self.reset, "reset_source": self.reset_source,
                "behaviour": self.behaviour, "shared": self.shared, "word": self.word,
                "stopped_only": self.stopped_only, "description": self.description,
                "fields": [dict(name=f.name, lsb=f.lsb, width=f.width, access=f.access,
                                reset=f.reset, enum=f.enum, abbr=f.abbr, part_lsb=f.part_lsb)
                           for f in self.fields]}


class RegisterMap:
    """Look-ups and accessors of one device's register table (see the module docstring)."""

    def __init__(self, registers, pages=()):
        self.registers: tuple = tuple(sorted(registers, key=lambda r: r.offset))
        self.pages: tuple = tuple(pages)
        self.by_offset: Mapping[int, Register] = {r.offset: r for r in self.registers}
        self.by_ident: Mapping[str, Register] = {r.ident: r for r in self.registers}
        self.OFFSET: Mapping[str, int] = {r.ident: r.offset for r in self.registers}
        if len(self.by_offset) != len(self.registers) or len(self.by_ident) != len(self.registers):
            raise ValueError("register table: duplicate offset or ident")

    def __iter__(self) -> Iterator[Register]:
        return iter(self.registers)

    def __len__(self) -> int:
        return len(self.registers)

    def __getitem__(self, ident: str) -> Register:
        return self.by_ident[ident]

    def __getattr__(self, ident: str) -> Register:
        """A register word by ident: ``REGS.STATUS``, ``REGS.QBASE_LO``."""
        if ident.startswith("_"):
            raise AttributeError(ident)
        try:
            return self.__dict__["by_ident"][ident]
        except KeyError:
            raise AttributeError(f"no register {ident!r}") from None

    def get(self, name: str, word: "int | None" = None) -> Register:
        """By ident ('QBASE_HI') or by TRM name plus word ('QBASE', 1)."""
        if word is None:
            if name in self.by_ident:
                return self.by_ident[name]
            word = 0
        for r in self.registers:
            if r.name == name and (r.word == word or (r.word is None and word == 0)):
                return r
        raise KeyError(name)

    def offset(self, name: str, word: "int | None" = None) -> int:
        return self.get(name, word).offset

    def at(self, offset: int) -> "Register | None":
        """The register word at a byte offset, None for a reserved offset."""
        return self.by_offset.get(offset)

    def ident_of(self, offset: int) -> "str | None":
        r = self.by_offset.get(offset)
        return r.ident if r else None

    def page_of(self, offset: int) -> "Page | None":
        for p in self.pages:
            if p.contains(offset):
                return p
        return None
