"""Parser for Vela's `--verbose-register-command-stream` print, and a field-by-field
comparison with our decoder (tlm.ethos_u85.isa).

Vela prints one block per command stream::

    Register command stream: 75 words
      Offset: Payload Param Code - Command                        Param, Fields
    0x000000:          0000 012f - NPU_SET_BLOCKDEP                   0, blockdep = 0
    // Conv2D , ...                                      (debug comment, not part of the stream)
    0x000004: 51eb8500 0026 4024 - NPU_SET_OFM_SCALE                 38, shift = 38, ...

`Payload` is word1 (cmd1 only), `Param` word0[31:16], `Code` word0[15:0]. Field values are
decimal, `0x..` hex (addresses), or enum names `<ENUM TYPE>_<VALUE>` in upper case.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from tlm.ethos_u85 import isa

_HEADER = re.compile(r"^Register command stream: (\d+) words\s*$")
_LINE = re.compile(r"^0x([0-9a-fA-F]+): (?:([0-9a-fA-F]{8})|\s{8}) ([0-9a-fA-F]{4}) ([0-9a-fA-F]{4})"
                   r" - (\w+)\s+(-?\d+)(?:, (.*))?$")
_FIELD = re.compile(r"^(\w+) = (\S+)$")

# Enum value names Vela spells differently from the TRM (TRM Table 3-100 calls elementwise
# mode 10 `lshr`; Vela's interface header calls it `lsr`, digest E-25).
VELA_ENUM_ALIASES = {"ELEMENTWISE_MODE_LSHR": "ELEMENTWISE_MODE_LSR"}


class VelaPrintError(ValueError):
    pass


@dataclass
class VelaCommand:
    offset: int
    payload: int | None          # word1 of a cmd1
    param: int                   # word0[31:16]
    code: int                    # word0[15:0]
    name: str
    fields: dict[str, str]       # field name -> value as printed
    line: str


@dataclass
class VelaStream:
    nwords: int
    commands: list[VelaCommand] = field(default_factory=list)


def parse(text: str) -> list[VelaStream]:
    """All command streams in Vela's stdout, in order."""
    streams: list[VelaStream] = []
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            streams.append(VelaStream(int(m.group(1))))
            continue
        m = _LINE.match(line)
        if not m:
            continue
        if not streams:
            raise VelaPrintError(f"command line before any stream header: {line!r}")
        off, payload, param, code, name, pvalue, rest = m.groups()
        if int(pvalue) != int(param, 16):
            raise VelaPrintError(f"param column {pvalue} disagrees with 0x{param}: {line!r}")
        fields = {}
        for item in (rest.split(", ") if rest else ()):
            fm = _FIELD.match(item.strip())
            if not fm:
                raise VelaPrintError(f"cannot parse field {item!r} in {line!r}")
            fields[fm.group(1)] = fm.group(2)
        streams[-1].commands.append(VelaCommand(int(off, 16), int(payload, 16) if payload else None,
                                                int(param, 16), int(code, 16), name, fields, line))
    return streams


def _vela_value_matches(f: isa.Field, ours: int, printed: str) -> bool:
    if f.enum is not None and not printed[0].isdigit() and printed[0] != "-":
        try:
            want = f"{f.enum.__name__}_{f.enum(ours).name}".upper()
        except ValueError:       # a reserved value has no name
            return False
        return printed == VELA_ENUM_ALIASES.get(want, want)
    value = int(printed, 0)
    mask = (1 << f.width) - 1    # Vela prints signed fields unsigned ...
    if f.signed and ours < 0 and value == (ours & mask) - 1:
        # ... and a negative one as 2**width - 1 + value, one less than two's complement
        # (seen for NPU_SET_OP_SCALAR: Payload c3c3c3c4 printed as scalar = 3284386755).
        # The Payload column, compared separately, carries the true bits.
        return True
    return (value & mask) == (ours & mask)


def compare(decoded: list[isa.Decoded], stream: VelaStream) -> list[str]:
    """Every difference between our decode and Vela's print (empty list = identical)."""
    problems = []
    if stream.nwords != sum(d.size for d in decoded) // 4:
        problems.append(f"Vela announces {stream.nwords} words, we decoded "
                        f"{sum(d.size for d in decoded) // 4}")
    if len(decoded) != len(stream.commands):
        problems.append(f"{len(decoded)} commands decoded, Vela printed {len(stream.commands)}")
    for d, v in zip(decoded, stream.commands):
        where = f"0x{d.offset:06x} {d.cmd.name}"
        w = d.words
        if (d.offset, d.cmd.name) != (v.offset, v.name):
            problems.append(f"{where}: Vela has 0x{v.offset:06x} {v.name}")
            continue
        if (v.code, v.param, v.payload) != (w[0] & 0xFFFF, w[0] >> 16, w[1] if len(w) > 1 else None):
            problems.append(f"{where}: words differ from Vela's {v.line!r}")
        ours = {f.name: f for f in d.cmd.fields}
        if set(ours) != set(v.fields):
            problems.append(f"{where}: fields {sorted(ours)} vs Vela {sorted(v.fields)}")
        for name in set(ours) & set(v.fields):
            if not _vela_value_matches(ours[name], d.fields[name], v.fields[name]):
                problems.append(f"{where}: {name}={ours[name].format(d.fields[name])} "
                                f"vs Vela {v.fields[name]}")
    return problems
