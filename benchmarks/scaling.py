"""Scaling of dlsweep's engine on the toy model: trajectory-steps/s and compile time against the
grid size (10^2 .. 10^6 trajectories, depths 1..6 mixed) and against depth (one depth per sweep,
16,384 trajectories), as a Markdown table and a plot.

    taskset -c 0 python -m benchmarks.scaling --write        # -> benchmarks/SCALING.md, scaling.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.common import LEVELS, LR, SIGMA_STAR, machine_info
from benchmarks.toy import engine_compute

HERE = Path(__file__).resolve().parent


def sweep_of(n_sigma0: int, depths: list[int], steps: int):
    from dlsweep import spec

    return spec.resolve({
        "name": "scaling", "model": "toy", "steps": steps, "dtype": "float32",
        "task": {"sigma_star": list(SIGMA_STAR)},
        "axes": {"depth": depths, "sigma0": {"logspace": [-6, -1], "num": n_sigma0}, "lr": [LR]},
        "record": {"levels": list(LEVELS)}, "stop": {"rel_loss": 0.0}}, source="benchmarks.scaling")


def measure(n_sigma0: int, depths: list[int], steps: int) -> dict:
    sweep = sweep_of(n_sigma0, depths, steps)
    compile_time, run_time, chunk, n_chunks = engine_compute(sweep, None)
    n = n_sigma0 * len(depths)
    return {"trajectories": n, "depths": f"{min(depths)}..{max(depths)}" if len(depths) > 1 else str(depths[0]),
            "chunk": chunk, "chunks": n_chunks, "steps": steps, "compile_s": compile_time.wall,
            "run_s": run_time.wall, "traj_steps_per_s": n * steps / run_time.wall}


def main(argv=None) -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--steps", type=int, default=1000)
    args.add_argument("--quick", action="store_true", help="sizes up to 10^4 and depths up to 8")
    args.add_argument("--write", action="store_true", help="write benchmarks/SCALING.md and scaling.png")
    args = args.parse_args(argv)
    sizes = [100, 1_000, 10_000] + ([] if args.quick else [100_000, 1_000_000])
    by_size = [measure(max(1, n // 6), [1, 2, 3, 4, 5, 6], args.steps) for n in sizes]
    by_depth = [measure(16_384, [d], args.steps) for d in ([1, 2, 4, 8] if args.quick else [1, 2, 4, 8, 16, 32])]
    info = machine_info("benchmarks.scaling")
    table = render(by_size, by_depth, info)
    print(table)
    if args.write:
        (HERE / "SCALING.md").write_text(table)
        plot(by_size, by_depth, HERE / "scaling.png")
    return 0


def render(by_size, by_depth, info) -> str:
    def rows(results):
        return "\n".join(f"| {r['trajectories']:,} | {r['depths']} | {r['chunk']:,} x {r['chunks']} | {r['compile_s']:.2f} s "
                         f"| {r['run_s']:.3f} s | {r['traj_steps_per_s']:.3g} |" for r in results)

    header = "| trajectories | depth | chunk x chunks | compile | run | traj-steps/s |\n|---|---|---|---|---|---|"
    machine = "\n".join(f"- {k}: {v}" for k, v in info.items())
    return (f"# dlsweep engine scaling (toy model, float32, hits at 3 levels, no early stop)\n\n"
            f"{by_size[0]['steps']:,} GD steps per trajectory, up to 200 recorded steps (log schedule); compile "
            f"and run timed separately, one process.\n\n"
            f"## Machine\n\n{machine}\n\n## Against grid size (depths 1..6 mixed)\n\n{header}\n{rows(by_size)}\n\n"
            f"## Against depth (one depth per sweep)\n\n{header}\n{rows(by_depth)}\n\n![scaling](scaling.png)\n")


def plot(by_size, by_depth, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(7.0, 2.8), layout="constrained")
    left.plot([r["trajectories"] for r in by_size], [r["traj_steps_per_s"] for r in by_size], "o-", color="#0072B2")
    left.set(xscale="log", yscale="log", xlabel="trajectories in the grid", ylabel="trajectory-steps / s",
             title="against grid size ($N$ = 1..6)")
    right.plot([int(r["depths"]) for r in by_depth], [r["traj_steps_per_s"] for r in by_depth], "o-", color="#D55E00")
    depths = [int(r["depths"]) for r in by_depth]
    right.set(xscale="log", yscale="log", xlabel="depth $N$ (16,384 trajectories)", ylabel="trajectory-steps / s",
              title="against depth")
    right.set_xticks(depths, [str(d) for d in depths])
    right.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    fig.savefig(path, dpi=150)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
