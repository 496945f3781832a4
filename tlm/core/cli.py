"""`npu-tlm`: the command line of every device's TLM (device-neutral).

Subcommands of the core: ``replay TRACE`` (any registered device, docs/trace-format.md),
``disasm FILE`` (the device that reads the file, or ``--device``: each registers a
``Disassembler`` through ``DeviceInfo.disasm``) and ``devices`` (the registry). A device adds
its own through ``DeviceInfo.cli``: a
``"module:attr"`` of a ``Commands`` (its subcommands as (add_parser, handler) pairs and the
exception types its handlers raise for bad input). A handler takes the parsed arguments and
returns the exit status. Expected failures (``CliError`` or a device's declared errors)
become one line ``npu-tlm: error: ...`` on stderr with exit status 1, never a traceback; a
usage error is one such line too, with exit status 2.
"""
from __future__ import annotations

import argparse
import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

PROG = "npu-tlm"


class CliError(Exception):
    """An expected failure with a message for the user."""


@dataclass(frozen=True)
class Commands:
    """A device's subcommands: (add_parser(subparsers) -> parser, handler(args) -> status)."""
    subcommands: tuple
    errors: tuple = field(default_factory=tuple)      # exception types that mean bad input


# --------------------------------------------------------------------------------------------
# replay
# --------------------------------------------------------------------------------------------
def _add_replay(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("replay", help="replay a register-and-memory trace on a device's TLM",
                       description="Run a trace (docs/trace-format.md) on the TLM of the device it "
                                   "names. Prints one line per failed check, then 'replay: N checks "
                                   "passed, M failed'. Exit 0: every check passed; 1: a check failed "
                                   "or the device faulted; 2: malformed trace.")
    p.add_argument("trace", help="trace file")
    p.add_argument("--config", help="device configuration (default: the trace's 'config', else "
                                    "the device's default)")
    return p


def cmd_replay(args: argparse.Namespace) -> int:
    from . import registry, trace
    try:
        tr = trace.parse(args.trace)
        try:
            info = registry.get(tr.device)
        except registry.UnknownDevice as e:
            raise trace.TraceFormatError(tr.path, tr.device_line, str(e)) from None
        try:
            target = info.make_target(args.config or tr.config)
        except registry.UnknownDevice as e:
            raise trace.TraceFormatError(tr.path, 0 if args.config else tr.config_line, str(e)) from None
        res = trace.replay(tr, target, on_line=print)
    except trace.TraceFormatError as e:
        sys.stdout.flush()
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    print(res.summary)
    return res.exit_status


# --------------------------------------------------------------------------------------------
# disasm
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Disassembler:
    """A device's `npu-tlm disasm`. ``sniff(path, head) -> int``: 2 the file is this device's
    for certain (a format it checks: an archive, a header with a checksum), 1 it may be (bare
    words), 0 it is not; *head* is the file's first bytes (empty if it is not a regular file).
    ``run(args) -> status`` prints the listing (``args.file``, ``args.no_header`` and the
    device's own options); ``add_arguments(group)`` adds those options; ``errors`` are its
    bad-input exception types (one ``npu-tlm: error:`` line); ``what`` the files it reads."""
    sniff: Callable[[Path, bytes], int]
    run: Callable[[argparse.Namespace], int]
    what: str = ""
    add_arguments: "Callable | None" = None
    errors: tuple = ()


SNIFF_BYTES = 4096


def disassemblers() -> dict:
    from .registry import devices, resolve
    return {n: resolve(d.disasm) for n, d in devices().items() if d.disasm}


def _add_disasm(sub) -> argparse.ArgumentParser:
    dis = disassemblers()
    p = sub.add_parser("disasm", help="disassemble a command stream or command buffer",
                       description="Print '# ' header lines and one line per command. The device "
                                   "is the one that reads the file (--device to name it): "
                                   + ", ".join(dis) + ".")
    p.add_argument("file", help="; ".join(f"{n}: {d.what}" for n, d in dis.items()))
    p.add_argument("--device", choices=sorted(dis), help="the device whose format the file is in")
    p.add_argument("--no-header", action="store_true", help="omit the '# ' header lines")
    owned = {}
    for name, d in dis.items():
        if d.add_arguments:
            group, actions = p.add_argument_group(f"{name} options"), []

            class _Group:                     # records the options a device adds
                @staticmethod
                def add_argument(*args, **kw):
                    actions.append(group.add_argument(*args, **kw))
                    return actions[-1]
            d.add_arguments(_Group)
            owned[name] = [(a.dest, a.option_strings[0], a.default) for a in actions]
    p.set_defaults(disasm_options=owned)
    return p


def _head(path: Path) -> bytes:
    """The first bytes of a regular file (b"" for anything else: no waiting on a FIFO)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return b""
        with open(path, "rb") as f:
            return f.read(SNIFF_BYTES)
    except OSError:
        return b""


def cmd_disasm(args: argparse.Namespace) -> int:
    dis = disassemblers()
    name = args.device
    if name is None:
        path, head = Path(args.file), _head(Path(args.file))
        score = {n: d.sniff(path, head) for n, d in dis.items()}
        best = max(score.values(), default=0)
        names = [n for n, s in score.items() if s == best and s > 0]
        if len(names) != 1:
            why = "no device reads it" if not names else f"{' and '.join(names)} both read it"
            raise CliError(f"{args.file}: {why}; name its format with --device ({', '.join(dis)})")
        name = names[0]
    for other, opts in args.disasm_options.items():
        for dest, flag, default in opts if other != name else ():
            if getattr(args, dest) != default:
                raise CliError(f"{args.file}: {flag} is an option of {other}, the file is read as {name}")
    d = dis[name]
    try:
        return d.run(args)
    except d.errors as e:
        raise CliError(str(e)) from None


# --------------------------------------------------------------------------------------------
# devices
# --------------------------------------------------------------------------------------------
def _add_devices(sub) -> argparse.ArgumentParser:
    return sub.add_parser("devices", help="list the registered devices",
                          description="One line per registered device: name, configurations, title.")


def cmd_devices(args: argparse.Namespace) -> int:
    from .registry import devices
    for name, d in devices().items():
        extras = [w for w, on in (("bench", d.bench), ("fuzz", d.fuzz)) if on]
        print(f"{name:<12} {', '.join(d.configs):<60} {d.title}"
              + (f" [{', '.join(extras)}]" if extras else ""))
    return 0


CORE = Commands(((_add_replay, cmd_replay), (_add_disasm, cmd_disasm), (_add_devices, cmd_devices)))


# --------------------------------------------------------------------------------------------
# parser
# --------------------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """A usage error is one line, `npu-tlm: error: [SUBCOMMAND: ]...` with a pointer to
    --help (exit status 2), instead of argparse's usage text plus the error."""

    def error(self, message: str):
        sub = self.prog[len(PROG):].strip()
        self.exit(2, f"{PROG}: error: {sub + ': ' if sub else ''}{message} (see '{self.prog} --help')\n")


def command_sets() -> list:
    """The core's commands, then every registered device's (DeviceInfo.cli)."""
    from .registry import devices, resolve
    return [CORE] + [resolve(d.cli) for d in devices().values() if d.cli]


def build_parser(sets=None) -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Transaction-level models of the project's NPUs")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for cs in sets if sets is not None else command_sets():
        for add, handler in cs.subcommands:
            try:
                p = add(sub)
            except argparse.ArgumentError as e:     # two devices chose one name
                raise RuntimeError(f"npu-tlm subcommand registered twice: {e}") from None
            p.set_defaults(handler=handler)
    return parser


def main(argv: "list[str] | None" = None) -> int:
    sets = command_sets()
    args = build_parser(sets).parse_args(argv)
    errors = (CliError,) + tuple(e for cs in sets for e in cs.errors)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except errors as e:
        sys.stdout.flush()
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    except MemoryError:
        sys.stdout.flush()
        print(f"{PROG}: error: out of memory (the model or an input is too large)", file=sys.stderr)
        return 1
    except BrokenPipeError:               # e.g. `npu-tlm disasm x | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    # `python -m tlm.core.cli`: run the imported module, whose CliError the devices raise
    from tlm.core import cli
    sys.exit(cli.main())
