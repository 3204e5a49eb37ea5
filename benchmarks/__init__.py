"""Benchmarks of dlsweep against the ways the toy-model sweep is usually run.

Run from the repository root, pinned to one core:

    taskset -c 0 python -m benchmarks            # full: toy (100k trajectories x 10k steps), matrix sensing,
                                                 # every reproduction (~ 1 hour)
    taskset -c 0 python -m benchmarks --quick    # the toy at small sizes, < 1 minute
    taskset -c 0 python -m benchmarks --write    # also write benchmarks/RESULTS.md, a section each
    taskset -c 0 python -m benchmarks --only toy,reproductions    # some of the sections

Modules:
    common          timing (wall + process CPU), the toy problem's constants, machine information
    toy             dlsweep end-to-end through `dlsweep.api.run`
    baselines       per-run NumPy f64, per-run jitted JAX, batched NumPy f32, and the fused-kernel ceiling
    report          the Markdown tables; each benchmark writes its own section of RESULTS.md
    matrix_sensing  deep matrix sensing at d = 5 and 10 against per-run jitted JAX and NumPy loops:
                    taskset -c 1 python -m benchmarks.matrix_sensing [--quick] [--write]
    per_run         the per-run jitted JAX loop of any sweep, from the model contract alone
    reproductions   every bundled reproduction at full size, dlsweep end to end against per_run:
                    python -m benchmarks.reproductions [NAME ...] [--sample N] [--write]
    scaling         the engine's throughput against grid size and depth (SCALING.md)
    layouts         the engine's layouts of a block on the toy sweep (block peak and replay, or levels
                    tested every step; steps per loop iteration), results compared bit for bit:
                    python -m benchmarks.layouts [--layouts peak/1,exact/8] [--profile] [--write]
"""

import os as _os

# Benchmarks time real compiles: dlsweep's persistent compilation cache is off unless asked for.
_os.environ.setdefault("DLSWEEP_CACHE_DIR", "off")
