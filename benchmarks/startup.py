"""How long the package takes to start: `import dlsweep`, `dlsweep --help`, and, for scale, the
import of the library behind the verbs (`import dlsweep.api`), each a fresh Python process,
median of REPEATS; and which of the heavy libraries each one loads (none for the first two).

    python -m benchmarks.startup [--write]      # a section of benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import report
from benchmarks.common import machine_info

RESULTS = Path(__file__).with_name("RESULTS.md")
REPEATS = 7
HEAVY = ("jax", "numpy", "pandas", "pyarrow", "matplotlib", "scipy", "optax")
CASES = {
    "`import dlsweep`": "import dlsweep",
    "`dlsweep --help`": "from dlsweep import cli\ntry:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass",
    "`import dlsweep.api` (what a verb loads)": "import dlsweep.api",
}
LIGHT = ("`import dlsweep`", "`dlsweep --help`")      # must load none of HEAVY


def measure(code: str) -> tuple[float, list[str]]:
    """(median wall seconds of a fresh `python -c code`, the heavy libraries it loaded)."""
    probe = f"{code}\nimport sys\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    times, loaded = [], ""
    for _ in range(REPEATS):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        times.append(time.perf_counter() - start)
        loaded = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    return statistics.median(times), [m for m in loaded.split(",") if m]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.startup", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the section to benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    info = machine_info("benchmarks.startup")
    rows, verdicts = [], []
    for name, code in CASES.items():
        seconds, loaded = measure(code)
        rows.append(f"| {name} | {seconds:.3f} s | {', '.join(loaded) or 'none'} |")
        if name in LIGHT:
            verdicts.append(f"- target {name} loads neither matplotlib nor scipy (nor JAX): "
                            f"{'met' if not loaded else 'NOT met: loads ' + ', '.join(loaded)}")
    markdown = "\n".join([
        "# dlsweep benchmark: start-up", "",
        f"Each a fresh `python -c` process, median of {REPEATS}; the libraries listed are those of "
        f"{', '.join(HEAVY)} in `sys.modules` afterwards.", "",
        "## Machine", "", report.info_block(info), "",
        "## Results", "",
        "| what | wall (median) | heavy libraries loaded |", "|---|---|---|", *rows, "", *verdicts, "",
        "The verbs import the library when they run (`dlsweep.cli`), so `--help`, `--version` and a "
        "mistyped command answer without loading JAX (`dlsweep --help` took 1.75 s when the command "
        "line imported the library first).",
    ])
    print(markdown)
    if args.write:
        report.write_section(RESULTS, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
