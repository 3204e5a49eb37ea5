"""The package's layering (docs/architecture.md, "Rooms"): every import of a dlsweep module points
to a module of the same or a lower layer, the leaves import nothing of dlsweep, and nothing above
the models names a model family; checked on the source (imports under `if TYPE_CHECKING:` are
for annotations only and not counted)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dlsweep"

# top to bottom; a module may import from its own layer and the layers below it
LAYERS = [
    ["dlsweep", "cli"],
    ["reproduce", "submit"],
    ["api"],
    ["drawing"],
    ["analyses", "thresholding"],
    ["sweeping"],
    ["slices"],
    ["plot", "spec"],
    ["models", "models.*"],
    ["compare"],
    ["plan"],
    ["engine"],
    ["analysis.incremental"],
    ["store", "grid", "progress", "analysis", "analysis.theory", "analysis.theory.hacohen"],
    ["analysis.theory.gissin", "analysis.theory.gidel", "analysis.theory.azulay"],
    ["errors", "warning", "figures", "model", "optimizers", "interrupt", "schema", "models.layers", "models.chain", "gallery"],
]
LEAVES = set(LAYERS[-1])
FAMILY_MODULES = tuple(sorted(path.stem for path in (PACKAGE / "models").glob("*.py")    # by their source
                             if "\nFAMILY = Family(" in path.read_text()))
NO_MODEL_NAMES = ("engine", "store", "grid", "plan", "spec", "sweeping", "thresholding", "analysis.incremental", "plot",
                  "figures", "drawing", "slices")


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    parts = parts[:-1] if parts[-1] == "__init__" else parts
    return ".".join(parts) or "dlsweep"


def _layer(module: str) -> int:
    for n, layer in enumerate(LAYERS):
        if module in layer:
            return n
    for n, layer in enumerate(LAYERS):          # a family module: models.*
        if any(entry.endswith(".*") and module.startswith(entry[:-1]) for entry in layer):
            return n
    raise AssertionError(f"module {module!r} has no layer in LAYERS (add it, and to docs/architecture.md)")


def _imports(tree: ast.Module) -> set[str]:
    """The dlsweep modules a module's source imports, without `if TYPE_CHECKING:` blocks."""
    found = set()

    def visit(node):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.split(".")[0] == "dlsweep":
            base = node.module.removeprefix("dlsweep").lstrip(".")
            for alias in node.names:
                sub = f"{base}.{alias.name}" if base else alias.name
                if (PACKAGE / (sub.replace(".", "/") + ".py")).exists() or (PACKAGE / sub.replace(".", "/")).is_dir():
                    found.add(sub)
                elif base:
                    found.add(base)          # a name of that module
                # else `from dlsweep import __version__`: the package's own version string
        elif isinstance(node, ast.Import):
            found.update(a.name.removeprefix("dlsweep.") for a in node.names if a.name.startswith("dlsweep."))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


SOURCES = {_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


@pytest.mark.parametrize("module", sorted(SOURCES))
def test_imports_point_down_the_layers(module):
    imported = _imports(ast.parse(SOURCES[module].read_text()))
    imported.discard(module)
    if module in LEAVES:
        assert not imported, f"leaf module {module} imports {sorted(imported)}"
    upward = sorted(m for m in imported if _layer(m) < _layer(module))
    assert not upward, f"{module} (layer {_layer(module)}) imports {upward} from a layer above it"


@pytest.mark.parametrize("module", NO_MODEL_NAMES)
def test_nothing_above_the_models_names_a_family(module):
    """The run, store, thresholds and figure code ask the sweep's family, never a family by name:
    no string literal of theirs is a family's name, and they import no family module."""
    tree = ast.parse(SOURCES[module].read_text())
    literals = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert not literals & set(FAMILY_MODULES), f"{module} names {sorted(literals & set(FAMILY_MODULES))}"
    family_imports = {m for m in _imports(tree) if re.fullmatch(rf"models\.({'|'.join(FAMILY_MODULES)})", m)}
    assert not family_imports, f"{module} imports {sorted(family_imports)}"


def test_every_family_module_defines_its_family():
    """models.FAMILIES is exactly the FAMILY of each module that defines one, named as its module:
    adding a family is adding its module."""
    from dlsweep import models

    assert len(FAMILY_MODULES) >= 8 and set(models.FAMILIES) == set(FAMILY_MODULES)
    for name in FAMILY_MODULES:
        assert models.FAMILIES[name] is __import__(f"dlsweep.models.{name}", fromlist=["FAMILY"]).FAMILY


def test_every_figure_kind_has_its_function():
    """The figure registry (`drawing.FIGURES`) draws exactly the kinds the command line offers."""
    from dlsweep import drawing, figures

    assert sorted(drawing.FIGURES) == sorted(figures.PLOT_KINDS)


def test_the_wheel_lists_every_package():
    """pyproject.toml's explicit `packages` name every package folder of dlsweep: one left out
    would be missing from the wheel (which CI's wheel check would find only after the suite)."""
    import tomllib

    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(path.parent.relative_to(PACKAGE.parent).parts) for path in PACKAGE.rglob("__init__.py")}
    assert found <= listed, f"not in pyproject.toml's packages: {sorted(found - listed)}"
