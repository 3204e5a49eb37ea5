"""The bundled reproductions (`dlsweep reproduce`): the list, each --quick version end to end
(run folder, thresholds, figures, thresholds against the theory of Gissin et al.), resuming, and
an unknown name."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dlsweep import api, cli, reproduce, store
from dlsweep.store import StoreError

NAMES = ("gissin-fig2", "gissin-depth-separation", "gissin-gd")
PAPER = {"gissin-fig2": "Figure 2", "gissin-depth-separation": "Theorem 2", "gissin-gd": "Theorem 3"}
FIGURES = {"gissin-fig2": ["trajectories.png"],
           "gissin-depth-separation": ["heatmap-sigma0-depth.png", "heatmap-r-depth.png", "thresholds.png"],
           "gissin-gd": ["lr.png", "heatmap-sigma0-lr.png"]}


@pytest.fixture(scope="module")
def quick(quick_reproduction):
    """name -> Reproduced of each quick reproduction (the session's runs, `quick_reproduction`)."""
    return {name: quick_reproduction(name) for name in NAMES}


def test_list_names_every_reproduction_with_its_paper_figure(capsys):
    from test_diagonal_net import AZULAY_NAMES
    from test_linear_net_phase import PHASE_NAMES
    from test_optimizers import MOMENTUM_NAMES
    from test_reproduce_models import MODEL_NAMES

    assert set(reproduce.REPRODUCTIONS) == (set(NAMES) | set(MODEL_NAMES) | set(PHASE_NAMES) | set(AZULAY_NAMES)
                                            | set(MOMENTUM_NAMES))
    assert cli.main(["reproduce", "--list"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    for name in NAMES:
        [n] = [k for k, line in enumerate(lines) if line.startswith(name + " ")]
        assert "Gissin et al. 2020" in lines[n] and PAPER[name] in lines[n], lines[n]
        assert lines[n + 1].strip() == reproduce.REPRODUCTIONS[name].what
    assert cli.main(["reproduce"]) == 0                          # no name: the list too
    assert capsys.readouterr().out == out


@pytest.mark.parametrize("name", NAMES)
def test_quick_reproduction_writes_folder_thresholds_and_figures(quick, name):
    result = quick[name]
    folder = result.folder
    assert result.name == name and folder.name == f"{name}-quick"
    assert (folder / "sweep.toml").is_file()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["name"] == f"{name}-quick"
    assert len(store.chunk_records(folder)) == manifest["n_chunks"] >= 1
    runs = api.load(folder)
    assert len(runs) == manifest["n_runs"] and not runs.diverged.any()
    if name == "gissin-fig2":
        assert result.thresholds is None and not (folder / api.THRESHOLDS_FILE).exists()
        assert sorted(runs.depth.unique()) == [1, 2, 3, 4] and sorted(runs.sigma0.unique()) == pytest.approx([1e-3, 0.1])
    else:
        assert result.thresholds == folder / api.THRESHOLDS_FILE and result.thresholds.is_file()
        assert len(pd.read_parquet(result.thresholds)) > 0
    assert result.figures == [folder / "figures" / f for f in FIGURES[name]]
    for path in result.figures:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def test_depth_separation_thresholds_match_gradient_flow_and_theorem_2(quick):
    result = quick["gissin-depth-separation"]
    table = pd.read_parquet(result.thresholds)
    # quick: depths 2, 3, 5; value 0 (sigma* = 1) against each of 0.5, 0.25, 0.1
    assert sorted(table.depth.unique()) == [2, 3, 5]
    assert sorted(zip(table.i, table.j)) == sorted([(0, j) for j in (1, 2, 3)] * 3)
    assert sorted(table.r.unique()) == pytest.approx([2.0, 4.0, 10.0])
    assert (table.s == 0.05).all() and (table.f == 0.95).all() and (table.method == "bisect").all()
    ok = table[table.status == "ok"]
    assert len(ok) == len(table) == 9
    np.testing.assert_allclose(ok.sigma0_th, ok.gf_exact, rtol=0.02)
    assert (ok.thm2_lower <= ok.sigma0_th).all()
    assert (ok.sigma0_th <= ok.thm2_upper_valid).all()
    # bisection refined each grid bracket to rtol 1e-4
    assert ((ok.bracket_hi / ok.bracket_lo - 1) <= 1e-4).all()


def test_gd_thresholds_inside_theorem_3_bounds(quick):
    result = quick["gissin-gd"]
    table = pd.read_parquet(result.thresholds)
    assert (table.depth == 2).all() and table.lr.nunique() == 4
    assert sorted(set(zip(table.i, table.j))) == [(0, 1), (0, 2)]
    assert (table.s == 0.1).all() and (table.f == 0.9).all()
    ok = table[table.status == "ok"]
    assert len(ok) == len(table) == 8
    lower, upper = ok.thm3_chain_lower.to_numpy(), ok.thm3_upper.to_numpy()
    assert np.isfinite(lower).sum() >= 6 and np.isfinite(upper).all()
    th = ok.sigma0_th.to_numpy()
    assert (th[np.isfinite(lower)] >= lower[np.isfinite(lower)]).all()
    assert (th <= upper).all()
    # at the smallest step size gradient descent is close to gradient flow
    smallest = ok[ok.lr == ok.lr.min()]
    np.testing.assert_allclose(smallest.sigma0_th, smallest.gf_exact, rtol=0.02)


def test_second_reproduce_resumes_and_gives_the_same_thresholds(quick, tmp_path, run_cli):
    first = quick["gissin-gd"]
    folder = tmp_path / first.folder.name
    shutil.copytree(first.folder, folder)
    parts = sorted(p for sub in ("runs", "trajectories") for p in (folder / sub).glob("*.parquet"))
    assert parts
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in parts}
    chunks = store.chunk_records(folder)
    thresholds = pd.read_parquet(folder / api.THRESHOLDS_FILE)
    (folder / api.THRESHOLDS_FILE).unlink()
    shutil.rmtree(folder / "figures")

    proc = run_cli("reproduce", "gissin-gd", "--quick", "--out-root", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"gissin-gd: run folder {folder}" in proc.stdout
    n_runs = len(store.load(folder))                 # how its runs ended, as `run` says it
    assert f"{folder}: {n_runs} trajectories, complete; {n_runs} converged, 0 diverged" in proc.stdout, proc.stdout
    assert f"thresholds: {folder / api.THRESHOLDS_FILE}" in proc.stdout
    for figure in FIGURES["gissin-gd"]:
        assert f"figure: {folder / 'figures' / figure}" in proc.stdout
        assert (folder / "figures" / figure).is_file()
    # no finished chunk was computed or written again
    assert sorted(p for sub in ("runs", "trajectories") for p in (folder / sub).glob("*.parquet")) == parts
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in parts} == before
    assert store.chunk_records(folder) == chunks
    pd.testing.assert_frame_equal(pd.read_parquet(folder / api.THRESHOLDS_FILE), thresholds)


def test_unknown_reproduction_is_an_error(tmp_path, capsys):
    with pytest.raises(StoreError) as info:
        reproduce.run("gissin-fig9", quick=True, out_root=tmp_path)
    message = str(info.value)
    assert "unknown reproduction 'gissin-fig9'" in message and "known: " in message
    assert all(name in message for name in NAMES)
    assert list(tmp_path.iterdir()) == []                     # nothing written

    assert cli.main(["reproduce", "gissin-fig9", "--quick", "--out-root", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("dlsweep: error: unknown reproduction 'gissin-fig9'")
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- --all and the gallery

def test_gallery_names_links_and_rewrites_only_its_section(tmp_path):
    """A figure's flat name drops the `figures` folders; the table links each PNG's thumbnail to
    the PNG and its other formats beside it; the README is rewritten between the markers only,
    and docs/gallery.md links relative to docs/."""
    from dlsweep import gallery

    run_root = tmp_path / "runs" / "gissin-fig5"
    figures = [run_root / "figures" / "values-variants.png", run_root / "figures" / "values-variants.pdf",
               run_root / "bias" / "figures" / "a.png"]
    for figure in figures:
        figure.parent.mkdir(parents=True, exist_ok=True)
        figure.write_bytes(figure.suffix.encode())
    docs = tmp_path / "docs"
    copies = gallery.publish(figures, run_root, "gissin-fig5", docs)
    assert [c.as_posix() for c in copies] == ["docs/figures/gissin-fig5-values-variants.png",
                                              "docs/figures/gissin-fig5-values-variants.pdf",
                                              "docs/figures/gissin-fig5-bias-a.png"]
    assert (docs / "figures" / "gissin-fig5-bias-a.png").read_bytes() == b".png"
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n\nbefore\n{gallery.START}\nold table\n{gallery.END}\nafter\n")
    rows = [gallery.Row("gissin-fig5", "Gissin et al. 2020, Figure 5", 9.4, copies, "same | order"),
            gallery.Row("gissin-fig3", "Gissin et al. 2020, Figure 3", None, (), "", " (not run)")]
    assert gallery.write(rows, docs, readme) == [docs / "gallery.md", docs / gallery.RECORD, readme]
    published = gallery.earlier(docs)
    before = published["gissin-fig5"]
    assert (before.seconds, before.figures, before.timing) == (9.4, copies, "")      # measured on this machine
    assert "gissin-fig3" not in published          # not run then: not recorded
    text = readme.read_text()
    assert text.startswith("# title\n\nbefore\n" + gallery.START + "\n") and text.endswith(gallery.END + "\nafter\n")
    assert "old table" not in text
    [fig5, fig3] = [line for line in text.splitlines() if line.startswith("| Gissin")]
    assert fig5.startswith("| Gissin et al. 2020, Figure 5 | `dlsweep reproduce gissin-fig5` | 9 s | ")
    assert ('<a href="docs/figures/gissin-fig5-values-variants.png"><img src="docs/figures/gissin-fig5-values-variants.png"'
            ' width="220"></a> [pdf](docs/figures/gissin-fig5-values-variants.pdf)<br>') in fig5
    assert fig5.endswith("| same \\| order |")
    assert "| not measured (not run) |" in fig3
    page = (docs / "gallery.md").read_text()
    assert '<img src="figures/gissin-fig5-values-variants.png"' in page and "docs/" not in page


def test_reproduce_all_publishes_the_figures_and_the_gallery(tmp_path, capsys):
    """`reproduce --all` at full size (here every reproduction skipped but the theory-only
    azulay-fig7-2) writes each figure in every format into docs/figures, removes the figures it
    published before and no longer draws, and writes a gallery row for every reproduction, the
    skipped ones with their figures and time published before; --quick leaves docs alone."""
    from dlsweep import gallery

    skipped = [name for name in reproduce.REPRODUCTIONS if name != "azulay-fig7-2"]
    docs = tmp_path / "docs"
    (docs / "figures").mkdir(parents=True)
    (docs / "figures" / "gissin-fig2-trajectories.png").write_bytes(b"earlier")
    (docs / "figures" / "azulay-fig7-2-old-name.png").write_bytes(b"earlier")
    gallery.write([gallery.Row("gissin-fig2", "Figure 2", 3.0, (Path("docs/figures/gissin-fig2-trajectories.png"),), ""),
                   gallery.Row("azulay-fig7-2", "Figure 7.2", 2.0, (Path("docs/figures/azulay-fig7-2-old-name.png"),),
                               "")], docs)
    argv = ["reproduce", "--all", "--out-root", str(tmp_path / "runs"), "--docs", str(docs), "--format", "png,pdf",
            "--skip", ",".join(skipped)]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"azulay-fig7-2: run folder {tmp_path / 'runs' / 'azulay-fig7-2'} (")
    assert sorted(p.name for p in (docs / "figures").iterdir()) == [
        "azulay-fig7-2-neuron-q-contours.pdf", "azulay-fig7-2-neuron-q-contours.png", "gissin-fig2-trajectories.png"]
    page = (docs / "gallery.md").read_text()
    assert len([line for line in page.splitlines() if line.startswith("| ") and "`dlsweep reproduce" in line]) == len(
        reproduce.REPRODUCTIONS)
    assert 'src="figures/gissin-fig2-trajectories.png"' in page and "| `dlsweep reproduce gissin-fig2` | 3 s |" in page
    assert "(not run: measured on" in page
    (docs / "gallery.md").unlink()
    assert cli.main([*argv, "--quick"]) == 0
    assert not (docs / "gallery.md").exists()
    capsys.readouterr()
    assert cli.main(["reproduce", "--all", "--skip", "nothing-such"]) == 2
    assert "skip: unknown reproduction 'nothing-such'" in capsys.readouterr().err


def test_reproduce_all_goes_on_past_a_failed_reproduction(tmp_path, monkeypatch, capsys):
    """One reproduction failing (here gissin-fig2, made to raise) stops no other: azulay-fig7-2 runs
    and is published, the failure is one error line naming it, the gallery keeps the failed one's
    earlier row, and the exit code is 2."""
    from dlsweep import gallery

    original = reproduce.run

    def failing(name, *args, **kwargs):
        if name == "gissin-fig2":
            raise MemoryError("out of memory in chunk 3")
        return original(name, *args, **kwargs)

    monkeypatch.setattr(reproduce, "run", failing)
    docs = tmp_path / "docs"
    docs.mkdir()
    gallery.write([gallery.Row("gissin-fig2", "Figure 2", 3.0, (Path("docs/figures/gissin-fig2-trajectories.png"),), "")],
                  docs)
    skipped = [name for name in reproduce.REPRODUCTIONS if name not in ("gissin-fig2", "azulay-fig7-2")]
    code = cli.main(["reproduce", "--all", "--out-root", str(tmp_path / "runs"), "--docs", str(docs),
                     "--skip", ",".join(skipped)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out.startswith("azulay-fig7-2: run folder ")
    assert captured.err == ("dlsweep: error: gissin-fig2 failed (MemoryError: out of memory in chunk 3); the others "
                            "ran; run it alone to see it again (its finished chunks are kept)\n")
    assert (docs / "figures" / "azulay-fig7-2-neuron-q-contours.png").is_file()
    page = (docs / "gallery.md").read_text()
    assert "| `dlsweep reproduce gissin-fig2` | 3 s |" in page
