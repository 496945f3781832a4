"""The Ethos-U85's `npu-tlm` subcommands: ``run``, ``trace`` (registered with the
device-neutral command line, tlm/core/cli.py, by ``DeviceInfo.cli``) and its ``disasm``
reader (``DeviceInfo.disasm``). Expected failures are
`CliError`, `VelaFormatError` or `IsaError`: one ``npu-tlm: error: ...`` line, exit status 1."""
from __future__ import annotations

import argparse
import os
import stat
import sys

from ..core.cli import PROG, CliError, Commands, Disassembler
from . import isa
from .config import Policy
from .vela import VelaFormatError, VelaModel, load


def header(m: VelaModel) -> list[str]:
    """'# ' lines describing the loaded model, printed before the disassembly."""
    fmt = m.source + (f", {m.cop_format}" if m.cop_format else ", bare command words")
    lines = [f"# model: {m.path} ({fmt})"]
    if m.config_word is not None:
        lines.append(f"# accelerator: {m.accelerator or 'unknown'} "
                     f"(CONFIG 0x{m.config_word:08x}, ID 0x{m.id_word:08x})")
    n = len(m.command_words)
    lines.append(f"# command stream: {n} words ({4 * n} bytes); read-only: {len(m.read_only)} bytes; "
                 f"scratch: {m.scratch_size} bytes; scratch_fast: {m.scratch_fast_size} bytes")
    def quant(t):
        q = t.quantization
        return (f" scale {','.join(f'{s:g}' for s in q.scale)} "
                f"zero_point {','.join(map(str, q.zero_point))}" if q.scale else "")

    for kind, tensors in (("input", m.inputs), ("output", m.outputs)):
        for i, t in enumerate(tensors):
            lines.append(f"# {kind}{i} {t.name!r}: {t.dtype} {list(t.shape)} "
                         f"region {t.region} offset 0x{t.offset:x}{quant(t)}")
    for t in m.unused_inputs:
        lines.append(f"# unused input {t.name!r}: {t.dtype} {list(t.shape)} (the command stream never "
                     f"reads it; not asked for)")
    for i, t in enumerate(m.variables):
        lines.append(f"# state{i} {t.name!r}: {t.dtype} {list(t.shape)} region {t.region} "
                     f"offset 0x{t.offset:x}{quant(t)}")
    return lines


# --------------------------------------------------------------------------------------------
# disasm
# --------------------------------------------------------------------------------------------
def _disasm_arguments(group) -> None:
    group.add_argument("--op-index", type=int, default=0,
                       help="which 'ethos-u' operator of a .tflite (default 0)")


def _sniff(path, head: bytes) -> int:
    """A Vela .npz (zip) or .tflite (TFL3) for certain; anything else may be bare words (load
    names what is wrong with it)."""
    if path.suffix in (".npz", ".tflite") or head[:4] == b"PK\x03\x04" or head[4:8] == b"TFL3":
        return 2
    return 1


def cmd_disasm(args: argparse.Namespace) -> int:
    """The model header and one line per command: byte offset, word(s), TRM mnemonic, decoded
    fields (the lines before a bad word are printed, then the error)."""
    m = load(args.file, op_index=args.op_index)
    out = sys.stdout
    if not args.no_header:
        out.write("\n".join(header(m)) + "\n")
    for d in isa.iter_decode(m.command_words):   # lines before a bad word are still printed
        out.write(isa.format_decoded(d) + "\n")
    return 0


# --------------------------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------------------------
def _add_run(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("run", help="run a Vela output on the TLM",
                       description="Run the network as the Ethos-U driver would and write its "
                                   "outputs (output0, output1, ... in NHWC) to an .npz file.")
    p.add_argument("model", help="*_vela.npz or *_vela.tflite")
    p.add_argument("--input", action="append", default=[], metavar="IN.npy",
                   help="one .npy per model input, in the model's input order (NHWC)")
    p.add_argument("--output", required=True, metavar="OUT.npz", help="where to write the outputs")
    p.add_argument("--config", metavar="ethos-u85-N",
                   help="accelerator configuration (default: the CONFIG word in the model)")
    p.add_argument("--op-index", type=int, default=0,
                   help="which 'ethos-u' operator of a .tflite (default 0)")
    p.add_argument("--max-steps", type=_budget, default=None, metavar="N",
                   help=f"stop (error) after N executed commands (default {Policy.default_max_steps:,})")
    p.add_argument("--max-work", type=_budget, default=None, metavar="N",
                   help=f"stop (error) after N work units: one per command and AXI transaction, one per "
                        f"64 bytes moved, OFM elements x kernel taps per kernel op "
                        f"(default {_num(Policy.default_max_work)})")
    p.add_argument("--strict", action="store_true",
                   help="exit with an error (status 1, no output file) when the run has a warning: an "
                        "UNPREDICTABLE or model-limit event, or a --config that disagrees with the "
                        "model's CONFIG word")
    return p


def _num(n: int) -> str:
    return f"2**{n.bit_length() - 1}" if n > 0 and not n & (n - 1) else f"{n:,}"


def _budget(text: str) -> int:
    """argparse type of --max-steps/--max-work: a positive integer."""
    try:
        n = int(text.replace("_", ""), 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {n}")
    return n


def _load_inputs(paths) -> list:
    """One array per .npy path (one clear CliError for a missing or unreadable file)."""
    import numpy as np
    inputs = []
    for path in paths:
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):
                raise CliError(f"{path}: not a regular file")
            # memory-mapped first: a header that declares more data than the file holds is
            # refused here instead of allocating it
            x = np.load(path, allow_pickle=False, mmap_mode="r")
        except FileNotFoundError:
            raise CliError(f"{path}: no such file") from None
        except (OSError, ValueError, EOFError) as e:
            raise CliError(f"{path}: not a readable .npy array ({e})") from None
        if not isinstance(x, np.ndarray):
            raise CliError(f"{path}: holds several arrays; give one .npy per input")
        inputs.append(np.array(x))
    return inputs


def cmd_run(args: argparse.Namespace) -> int:
    import numpy as np

    from .runner import RunError, run_model

    model = load(args.model, op_index=args.op_index)
    inputs = _load_inputs(args.input)
    try:
        result = run_model(model, inputs, config=args.config, max_steps=args.max_steps, max_work=args.max_work,
                           strict=args.strict)
    except RunError as e:
        _warn(args.model, e.warnings)
        if e.kind == "strict":
            n = sum(w.count for w in e.warnings)
            raise CliError(f"{args.model}: --strict: the run had {n} warning event{'s' * (n != 1)} "
                           f"(listed above); no output written") from None
        raise CliError(f"{args.model}: {e}") from None
    _warn(args.model, result.warnings)
    try:
        with open(args.output, "wb") as f:   # np.savez(name) would append '.npz'
            np.savez(f, **{f"output{i}": x for i, x in enumerate(result.outputs)})
    except OSError as e:
        raise CliError(f"{args.output}: cannot write ({e.strerror or e})") from None
    return 0


def _warn(model: str, warnings) -> None:
    """One `npu-tlm: warning: ...` line on stderr per kind of event (tlm.ethos_u85.runner.RunWarning)."""
    sys.stdout.flush()
    for w in warnings:
        print(f"{PROG}: warning: {model}: {w}", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# trace
# --------------------------------------------------------------------------------------------
def _add_trace(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("trace", help="turn a Vela run on the TLM into a portable trace",
                       description="Run the network as the Ethos-U driver would and write the "
                                   "host's actions as a trace (docs/trace-format.md): DIR/trace.txt "
                                   "and its memory images, with the outputs the TLM computed as "
                                   "check_mem expectations. Replay it with 'npu-tlm replay' or "
                                   "'make sim TRACE=DIR/trace.txt'.")
    p.add_argument("model", help="*_vela.npz or *_vela.tflite")
    p.add_argument("--input", action="append", default=[], metavar="IN.npy",
                   help="one .npy per model input, in the model's input order (NHWC)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for trace.txt and its files")
    p.add_argument("--config", metavar="ethos-u85-N",
                   help="accelerator configuration (default: the CONFIG word in the model)")
    p.add_argument("--op-index", type=int, default=0,
                   help="which 'ethos-u' operator of a .tflite (default 0)")
    p.add_argument("--max-steps", type=_budget, default=None, metavar="N",
                   help="device steps the job may take before the run is an error")
    return p


def cmd_trace(args: argparse.Namespace) -> int:
    from .runner import RunError
    from .vela_trace import write_trace

    model = load(args.model, op_index=args.op_index)
    inputs = _load_inputs(args.input)
    try:
        path = write_trace(model, inputs, args.out, config=args.config, max_steps=args.max_steps)
    except RunError as e:
        raise CliError(f"{args.model}: {e}") from None
    except OSError as e:
        raise CliError(f"{args.out}: cannot write ({e.strerror or e})") from None
    print(f"{PROG}: wrote {path}")
    return 0


# --------------------------------------------------------------------------------------------
# Registered with tlm/core/cli.py (DeviceInfo.cli)
# --------------------------------------------------------------------------------------------
COMMANDS = Commands(((_add_run, cmd_run), (_add_trace, cmd_trace)), errors=(VelaFormatError, isa.IsaError))
DISASM = Disassembler(_sniff, cmd_disasm, "*_vela.npz, *_vela.tflite or a .bin of little-endian words",
                      _disasm_arguments, errors=(VelaFormatError, isa.IsaError))


def main(argv: "list[str] | None" = None) -> int:
    """`npu-tlm` (tlm/core/cli.py), which has these commands among every device's."""
    from ..core.cli import main as core_main
    return core_main(argv)


if __name__ == "__main__":
    sys.exit(main())
