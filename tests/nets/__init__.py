"""Test networks (shared by the devices' tests): TFLite builder, catalog, LiteRT reference, Vela harness.

API::

    nets.NAMES                       # NPU-only catalog models (ALL_NAMES: every model,
                                     #  CPU_NAMES: vela falls back to CPU; names(tag))
    nets.MODELS[name]                # Entry: fn, npu, tags, note
    nets.build(name) -> bytes        # deterministic TFLite flatbuffer
    nets.reference(tflite_bytes, inputs=None, seed=1235) -> (inputs, outputs)  # BUILTIN_REF
    nets.compile_vela(tflite_path, accel_config, out_dir, output_format='raw', extra_args=(),
                      system_config=None, memory_mode=None) -> (output_path, stdout)
    nets.MEMORY_MODES                # name -> extra vela args
    nets.compiled(name, accel_config, memory_mode='default', output_format='raw',
                  cache_dir=None) -> path   # cached under build/vela-cache/
"""

from .builder import Graph, T
from .catalog import ALL_NAMES, CPU_NAMES, MODELS, NAMES, VELA_VS_LITERT, build, graph, names, seed_of
from .compile import MEMORY_MODES, compile_vela, compiled, compiled_bytes, compiled_stdout, vela_args, vela_version
from .reference import DEFAULT_INPUT_SEED, io_quantization, make_inputs, reference, run

__all__ = [
    "ALL_NAMES", "CPU_NAMES", "DEFAULT_INPUT_SEED", "Graph", "MEMORY_MODES", "MODELS", "NAMES", "T", "build",
    "compile_vela", "compiled", "compiled_bytes", "compiled_stdout", "graph", "io_quantization",
    "make_inputs", "names", "reference", "run", "seed_of", "vela_args", "vela_version", "VELA_VS_LITERT",
]
