"""Command line: `dlsweep run | show | models`. A thin shell over `dlsweep.api`."""

from __future__ import annotations

import argparse
import json
import sys

from dlsweep import api
from dlsweep.spec import SpecError
from dlsweep.store import StoreError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlsweep", description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    run = verbs.add_parser("run", help="run a sweep spec into a Parquet dataset folder")
    run.add_argument("spec", help="sweep TOML file, e.g. sweeps/toy-threshold.toml")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a spec key (TOML value), e.g. --set steps=20000 --set axes.lr=[1e-3]")
    run.add_argument("--out", help="dataset folder (default runs/<name>)")
    run.add_argument("--chunk-size", type=int, help="trajectories per compiled call (default: from a memory estimate)")
    run.add_argument("--max-chunks", type=int, help="stop after this many chunks; run again to fill the rest")
    run.add_argument("--overwrite", action="store_true", help="empty the folder and start over")
    run.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")

    show = verbs.add_parser("show", help="summary of a finished or partial run folder")
    show.add_argument("folder")
    show.add_argument("--json", action="store_true", help="print the summary as JSON")

    verbs.add_parser("models", help="list the model families")
    return parser


def _run(args) -> int:
    report = api.run(args.spec, out=args.out, overrides=args.overrides, chunk_size=args.chunk_size,
                     overwrite=args.overwrite, progress_bar=False if args.no_progress else None,
                     max_chunks=args.max_chunks)
    if report.chunks_run:
        print(f"{report.folder}: ran {report.chunks_run} chunk(s) "
              f"({report.traj_steps:.3g} trajectory-steps) in {report.run_seconds:.2f} s "
              f"= {report.traj_steps_per_second:.3g} traj-steps/s; compile {report.compile_seconds:.2f} s")
    if report.chunks_skipped:
        print(f"{report.folder}: {report.chunks_skipped} chunk(s) were already finished (resumed)")
    status = "complete" if report.chunks_missing == 0 else f"{report.chunks_missing} chunk(s) still missing"
    print(f"{report.folder}: {report.n_runs} trajectories, {status}")
    return 0


def _show(args) -> int:
    summary = api.show(args.folder)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    width = max(len(k) for k in summary)
    for key, value in summary.items():
        if key == "missing_chunks":
            value = "none" if not value else ", ".join(map(str, value[:20])) + (" ..." if len(value) > 20 else "")
        elif key == "columns":
            value = ", ".join(value)
        print(f"{key:<{width}}  {value}")
    return 0


def _models(args) -> int:
    for row in api.list_models().itertuples():
        print(f"{row.model}\n  {row.summary}\n  axes: {row.axes}\n  task: {row.task}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return {"run": _run, "show": _show, "models": _models}[args.verb](args)
    except (SpecError, StoreError) as err:
        print(f"dlsweep: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dlsweep: interrupted; finished chunks are kept, run again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
