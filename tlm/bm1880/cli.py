"""The BM1880's `npu-tlm disasm` (DeviceInfo.disasm, tlm/core/cli.py): a command buffer in this
model's format (docs/devices/bm1880.md) one command a line. A malformed buffer: the commands
before the bad one are listed, then one error line naming its offset and what is wrong."""
from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path

from ..core.cli import CliError, Disassembler
from .descriptors import FORMAT_VERSION, HDR_SIZE, MAX_CMDBUF, DecodeError, decode, disassemble, unpack_header


def _sniff(path: Path, head: bytes) -> int:
    """2 when the first command decodes whole (version, kind, engine, CRC-8 over header and
    payload); 0 otherwise."""
    if len(head) < HDR_SIZE:
        return 0
    try:
        decode(head[:HDR_SIZE + unpack_header(head)["len"]])
    except DecodeError:
        return 0
    return 2


def _read(name: str) -> bytes:
    path = Path(name)
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise CliError(f"{name}: not a regular file")
        if st.st_size > MAX_CMDBUF:
            raise CliError(f"{name}: {st.st_size} bytes, more than the {MAX_CMDBUF}-byte command buffer "
                           "the chip model takes")
        return path.read_bytes()
    except FileNotFoundError:
        raise CliError(f"{name}: no such file") from None
    except OSError as e:
        raise CliError(f"{name}: cannot read ({e.strerror or e})") from None


def cmd_disasm(args: argparse.Namespace) -> int:
    buf = _read(args.file)
    if not buf:
        raise CliError(f"{args.file}: empty file")
    try:
        lines, bad = disassemble(buf), None
    except DecodeError as e:
        lines, bad = (disassemble(buf[:e.offset]) if e.offset > 0 else []), e
    if not args.no_header:
        n = len(decode(buf)) if bad is None else None
        print(f"# bm1880 command buffer: {args.file} ({len(buf)} bytes, format version {FORMAT_VERSION}"
              + (f", {n} records)" if n is not None else ")"))
    for ln in lines:
        print(ln)
    if bad is not None:
        sys.stdout.flush()
        raise CliError(f"{args.file}: {bad}")
    return 0


DISASM = Disassembler(_sniff, cmd_disasm, "a command buffer (docs/devices/bm1880.md)")
