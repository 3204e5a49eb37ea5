"""The engine's layouts of a block, side by side on the toy sweep (the `toy` benchmark's sweep).

    python -m benchmarks.layouts [--trajectories N] [--steps S] [--layouts peak/1,exact/1,exact/8] [--profile] [--write]

A layout is `<hits>/<unroll>`: `peak` (a block runs with a running maximum of sigma, and the
trajectories that may have reached a level are run again with a test after every step) or
`exact` (the levels tested after every step, `engine.Program.hits_every_step`); `unroll`, the GD
steps written out per iteration of the compiled loop (`engine.Program.unroll`). Each layout's
chunk programs are compiled and run as `api.run` runs them (engine alone: no tables, no files);
the first layout is the reference, and every other's first-hitting steps, stop steps and final
losses are compared with it bit for bit. The layout `engine.with_layout` picks on this backend is
marked.

`--profile` also traces one chunk of each layout (`jax.profiler`) and prints how long each device
stream was busy against the chunk's wall time, with the busiest one's kernels by total time:
where the device is mostly idle, the chunk is bound by launching work and waiting for loop
tests, not by computing. Kernels that XLA launches inside command buffers (CUDA graphs) are not
traced one by one; run with `XLA_FLAGS=--xla_gpu_enable_command_buffer=` to see them all.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np

from benchmarks import report
from benchmarks.common import DEPTHS, Problem, machine_info, on_device, timed

MODULE = "benchmarks.layouts"
RESULTS = Path(__file__).with_name("RESULTS.md")


def parse_layout(text: str) -> dict:
    """`exact/8` -> the Program fields {hits_every_step: True, unroll: 8}."""
    hits, _, unroll = text.partition("/")
    if hits not in ("peak", "exact") or not unroll.isdigit() or int(unroll) < 1:
        raise argparse.ArgumentTypeError(f"expected <peak|exact>/<unroll >= 1>, got {text!r}")
    return {"hits_every_step": hits == "exact", "unroll": int(unroll)}


def run_layout(sweep, fields: dict, profile: bool = False):
    """Compile and run every chunk of `sweep` with the layout `fields`; the compile and run timings,
    the chunk size and the concatenated summaries (hit, steps_run, final_loss) with `executed`;
    with `profile`, the last chunk run again under `device_profile` (else None)."""
    from dlsweep import api, grid

    program, flat, task = api.compile_inputs(sweep)
    program = dataclasses.replace(program, **fields)
    group = api.chunk_group(sweep, program)
    size = api.default_chunk_size(program, group, list(flat.columns), task)
    with timed() as compile_time:
        compiled = api.compile_sweep(sweep, program, task, size, group)
    summaries = []
    with timed() as run_time:
        for chunk in grid.chunks(flat.size, size, group):
            summary, _ = compiled(np.arange(chunk.start, chunk.stop), flat.rows(chunk.start, chunk.stop), task)
            summaries.append({k: np.asarray(summary[k]) for k in ("hit", "steps_run", "final_loss", "executed")})
    joined = {k: np.concatenate([np.atleast_1d(s[k]) for s in summaries]) for k in summaries[0]}
    traced = device_profile(compiled, (np.arange(chunk.start, chunk.stop), flat.rows(chunk.start, chunk.stop), task)) \
        if profile else None
    return compile_time, run_time, size, joined, traced


def device_profile(compiled, args, top: int = 8) -> str:
    """One call of `compiled(*args)` traced by `jax.profiler`: the wall time, the time each device
    stream was busy, and the busiest one's `top` kernels (or copies) by total time."""
    import collections
    import glob
    import tempfile

    import jax
    from jax.profiler import ProfileData

    with tempfile.TemporaryDirectory() as folder:
        with jax.profiler.trace(folder), timed() as wall:
            jax.block_until_ready(compiled(*args))
        data = ProfileData.from_file(glob.glob(f"{folder}/**/*.xplane.pb", recursive=True)[0])
    streams = [line for plane in data.planes if plane.name.startswith("/device:") and "CPU" not in plane.name
               for line in plane.lines]
    if not streams:
        return f"wall {wall.wall * 1e3:.1f} ms; no accelerator stream traced"
    busy = {line.name: collections.Counter() for line in streams}
    counts = {line.name: collections.Counter() for line in streams}
    for line in streams:
        for event in line.events:
            busy[line.name][event.name] += event.duration_ns
            counts[line.name][event.name] += 1
    name = max(busy, key=lambda n: sum(busy[n].values()))
    lines = [f"wall {wall.wall * 1e3:.1f} ms; busy: " + ", ".join(
        f"{stream} {sum(busy[stream].values()) / 1e6:.1f} ms in {sum(counts[stream].values())} events"
        for stream in sorted(busy, key=lambda n: -sum(busy[n].values()))), f"the busiest, {name}:"]
    lines += [f"  {ns / 1e6:8.2f} ms {counts[name][kernel]:7d} x {ns / counts[name][kernel] / 1e3:7.2f} us  {kernel}"
              for kernel, ns in busy[name].most_common(top)]
    return "\n".join(lines)


def chosen_layout(sweep) -> str:
    """The layout `engine.with_layout` picks for `sweep` on this backend, as `<hits>/<unroll>`."""
    from dlsweep import api

    program = api.compile_inputs(sweep)[0]
    return f"{'exact' if program.hits_every_step else 'peak'}/{program.unroll}"


def agreement(reference: dict, other: dict) -> str:
    same = [name for name in ("hit", "steps_run", "final_loss") if np.array_equal(reference[name], other[name])]
    return "bit for bit" if len(same) == 3 else f"equal: {', '.join(same) or 'none'}"


def main(argv=None) -> int:
    from dlsweep import spec

    from benchmarks import toy

    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n\n")[0])
    p.add_argument("--trajectories", "-n", type=int, default=12_000)
    p.add_argument("--steps", type=int, default=10_000)
    p.add_argument("--layouts", default="peak/1,exact/1,exact/8",
                   type=lambda s: [(t, parse_layout(t)) for t in s.split(",")])
    p.add_argument("--profile", action="store_true", help="trace one chunk of each layout and print its kernels")
    p.add_argument("--write", action="store_true", help="write the section of benchmarks/RESULTS.md")
    args = p.parse_args(argv)
    problem = Problem(n_sigma0=-(-args.trajectories // len(DEPTHS)), steps=args.steps)
    sweep = spec.resolve(toy.spec_dict(problem), source=MODULE)
    chosen = chosen_layout(sweep)
    needed = sweep.n_runs * sweep.steps
    rows, profiles, reference = [], [], None
    for name, fields in args.layouts:
        compile_time, run_time, size, result, traced = run_layout(sweep, fields, args.profile)
        if traced:
            profiles += [f"- {name}, its last chunk traced:", "", "```", traced, "```", ""]
            print(traced)
        reference = reference or result
        rows.append(f"| {name}{' (chosen here)' if name == chosen else ''} | {size:,} | {compile_time.wall:.2f} "
                    f"| {run_time.wall:.3f} | {needed / run_time.wall:.3g} "
                    f"| {result['executed'].sum() / needed:.3f} | {agreement(reference, result)} |")
        print(rows[-1], flush=True)
    markdown = "\n".join([
        f"# {on_device('dlsweep benchmark: the layouts of a block, toy sweep')}", "",
        f"{sweep.n_runs:,} toy trajectories x {sweep.steps:,} steps with hitting times at 3 levels, no early stop, "
        "the engine alone (compiled chunk programs, results copied to NumPy). See `benchmarks/layouts.py`.", "",
        "## Machine", "", report.info_block(machine_info(MODULE)), "",
        "## Result", "",
        "| layout | chunk | compile s | run s | traj-steps/s | executed / needed | against the first |",
        "|---|---|---|---|---|---|---|", *rows,
        *(["", "## Device profile", "", *profiles] if profiles else [])])
    print(markdown)
    if args.write:
        report.write_section(RESULTS, markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
