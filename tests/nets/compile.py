"""Run Arm Vela (regor backend) as a subprocess, with an on-disk compile cache."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CACHE = REPO / "build" / "vela-cache"      # $NETS_VELA_CACHE overrides it
DEFAULT_SYSTEM_CONFIG = "Ethos_U85_SYS_DRAM_Mid"
VELA_INI = "Arm/vela.ini"  # resolved by vela relative to its config_files folder

# memory-mode name -> extra vela arguments
MEMORY_MODES: dict[str, tuple[str, ...]] = {
    # What vela does without any memory arguments (it warns and picks these):
    # Dedicated_Sram_384KB, arena in DRAM (region 1), scratch_fast in SRAM (region 2), weight DMA.
    "default": ("--config", VELA_INI, "--system-config", DEFAULT_SYSTEM_CONFIG,
                "--memory-mode", "Dedicated_Sram_384KB"),
    # SRAM shared between the arena and staging: scratch_fast_size == 0.
    "shared_sram": ("--config", VELA_INI, "--system-config", "Ethos_U85_SYS_Flash_High",
                    "--memory-mode", "Shared_Sram"),
    # Everything in SRAM, no DMA at all: only regions 0 and 1.
    "sram_only": ("--config", VELA_INI, "--system-config", DEFAULT_SYSTEM_CONFIG,
                  "--memory-mode", "Sram_Only"),
    # Inputs in region 3 and outputs in region 4 (requires the COP2 driver payload).
    "separate_io": ("--config", VELA_INI, "--system-config", DEFAULT_SYSTEM_CONFIG,
                    "--memory-mode", "Dedicated_Sram_384KB",
                    "--separate-io-regions", "--cop-format", "COP2"),
}


def vela_executable() -> str:
    cand = Path(sys.executable).parent / "vela"
    if cand.exists():
        return str(cand)
    found = shutil.which("vela")
    if not found:
        raise RuntimeError("vela executable not found next to sys.executable or on PATH")
    return found


@lru_cache(maxsize=1)
def vela_version() -> str:
    try:
        from importlib.metadata import version

        return version("ethos-u-vela")
    except Exception:  # pragma: no cover - fall back to asking the tool
        r = subprocess.run([vela_executable(), "--version"], capture_output=True, text=True)
        return r.stdout.strip()


def _memory_args(system_config, memory_mode) -> list[str]:
    if memory_mode in MEMORY_MODES:
        args = list(MEMORY_MODES[memory_mode])
        if system_config is not None:
            i = args.index("--system-config")
            args[i + 1] = system_config
        return args
    if system_config is None and memory_mode is None:
        return []
    args = ["--config", VELA_INI, "--system-config", system_config or DEFAULT_SYSTEM_CONFIG]
    if memory_mode is not None:
        args += ["--memory-mode", memory_mode]
    return args


def vela_args(accel_config, output_format="raw", extra_args=(), system_config=None,
              memory_mode=None) -> list[str]:
    """The vela argument list (without network/output-dir) for these settings."""
    if output_format not in ("raw", "tflite"):
        raise ValueError(f"output_format must be 'raw' or 'tflite', not {output_format!r}")
    args = ["--accelerator-config", accel_config, "--output-format", output_format]
    args += _memory_args(system_config, memory_mode)
    args += [str(a) for a in extra_args]
    return args


def compile_vela(tflite_path, accel_config, out_dir, output_format="raw", extra_args=(),
                 system_config=None, memory_mode=None):
    """Compile ``tflite_path`` with vela; returns ``(output_path, stdout)``.

    ``memory_mode`` is either a key of :data:`MEMORY_MODES` or a raw vela memory-mode name
    (then ``--config Arm/vela.ini`` and ``system_config`` or Ethos_U85_SYS_DRAM_Mid are used).
    Raises RuntimeError (with vela's stderr) if vela fails or produced no output.
    """
    tflite_path = Path(tflite_path)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [vela_executable(), *vela_args(accel_config, output_format, extra_args, system_config,
                                         memory_mode),
           "--output-dir", str(out_dir), str(tflite_path)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    suffix = "_vela.npz" if output_format == "raw" else "_vela.tflite"
    out = out_dir / (tflite_path.stem + suffix)
    if r.returncode != 0 or not out.exists():
        raise RuntimeError(
            f"vela failed (rc={r.returncode}): {' '.join(cmd)}\n"
            f"--- stderr ---\n{r.stderr}\n--- stdout (tail) ---\n{r.stdout[-3000:]}"
        )
    return out, r.stdout


def cache_key(tflite_bytes: bytes, args) -> str:
    h = hashlib.sha256()
    h.update(tflite_bytes)
    h.update(json.dumps([list(args), vela_version()]).encode())
    return h.hexdigest()[:20]


def compiled_bytes(tflite_bytes: bytes, stem: str, accel_config, memory_mode="default",
                   output_format="raw", cache_dir=None, extra_args=()) -> Path:
    """Compile (or fetch from the cache) a model given as bytes; returns the output path.

    The cache entry is a directory holding the model, vela's output and stdout
    (``vela_stdout.txt``). Entries are created atomically (compile to a temp dir, rename),
    so concurrent test processes are safe.
    """
    cache_dir = Path(cache_dir or os.environ.get("NETS_VELA_CACHE") or DEFAULT_CACHE)
    args = vela_args(accel_config, output_format, extra_args, None, memory_mode)
    key = cache_key(tflite_bytes, args)
    entry = cache_dir / f"{stem}-{accel_config}-{memory_mode}-{output_format}-{key}"
    suffix = "_vela.npz" if output_format == "raw" else "_vela.tflite"
    out = entry / (stem + suffix)
    if out.exists():
        return out
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{stem}-", dir=cache_dir))
    try:
        src = tmp / f"{stem}.tflite"
        src.write_bytes(tflite_bytes)
        _, stdout = compile_vela(src, accel_config, tmp, output_format, extra_args,
                                 memory_mode=memory_mode)
        (tmp / "vela_stdout.txt").write_text(stdout)
        try:
            os.rename(tmp, entry)
        except OSError:
            if not out.exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def compiled(name, accel_config, memory_mode="default", output_format="raw", cache_dir=None):
    """Path of the vela output for catalog model ``name`` (cached)."""
    from .catalog import build

    return compiled_bytes(build(name), name, accel_config, memory_mode, output_format, cache_dir)


def compiled_stdout(path) -> str:
    """Vela's stdout for a cache entry returned by :func:`compiled`."""
    return (Path(path).parent / "vela_stdout.txt").read_text()
