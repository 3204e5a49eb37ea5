"""Sweep specs: every error names the file, the key and what was expected (in Python's words:
`overrides=[...]`); overrides; duplicate axis values and a blank name are errors; a seed axis
over a model without randomness warns; the resolved spec round-trips through TOML with the same
hash."""

from __future__ import annotations

import tomllib
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import SMALL, merged
from dlsweep import api, models, spec
from dlsweep.spec import SpecError
from dlsweep.warning import DlsweepWarning

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "sweeps" / "toy-threshold.toml"

# (changes to SMALL, keys to drop, the key the error must name, text the error must contain)
ERRORS = {
    # unknown keys, at every level
    "unknown top-level": ({"colour": "red"}, (), "colour", "unknown key"),
    "unknown axis": ({"axes": {"width": [4]}}, (), "axes.width", "unknown key"),
    "unknown record": ({"record": {"every": 3}}, (), "record.every", "unknown key"),
    "unknown stop": ({"stop": {"patience": 3}}, (), "stop.patience", "unknown key"),
    "unknown task": ({"task": {"noise": 0.1}}, (), "task.noise", "unknown key"),
    "unknown model": ({"model": "mlp"}, (), "model", "toy"),
    # wrong types
    "steps a string": ({"steps": "400"}, (), "steps", "integer >= 1"),
    "steps a float": ({"steps": 400.0}, (), "steps", "integer >= 1"),
    "steps a bool": ({"steps": True}, (), "steps", "integer >= 1"),
    "steps zero": ({"steps": 0}, (), "steps", "integer >= 1"),
    "seed negative": ({"seed": -1}, (), "seed", "integer >= 0"),
    "name not a string": ({"name": 3}, (), "name", "folder name"),
    "name with slash": ({"name": "a/b"}, (), "name", "folder name"),
    "name empty": ({"name": ""}, (), "name", "non-blank folder name"),
    "name blank": ({"name": "  \t "}, (), "name", "non-blank folder name"),
    "axes not a table": ({"axes": [1, 2]}, (), "axes", "table"),
    "task not a table": ({"task": 3.0}, (), "task", "table"),
    "record not a table": ({"record": "log"}, (), "record", "table"),
    "stop not a table": ({"stop": 1}, (), "stop", "table"),
    "axis a string": ({"axes": {"lr": "fast"}}, (), "axes.lr", "expected a list"),
    "axis entry a string": ({"axes": {"lr": [1e-3, "x"]}}, (), "axes.lr", "finite numbers"),
    "axis entry a bool": ({"axes": {"depth": [True]}}, (), "axes.depth", "finite numbers"),
    "points a float": ({"record": {"points": 2.5}}, (), "record.points", "integer >= 2"),
    "points too few": ({"record": {"points": 1}}, (), "record.points", "integer >= 2"),
    "rel_loss a string": ({"stop": {"rel_loss": "tiny"}}, (), "stop.rel_loss", "finite number"),
    "blowup <= 1": ({"stop": {"blowup": 1.0}}, (), "stop.blowup", "> 1"),
    "check_every zero": ({"stop": {"check_every": 0}}, (), "stop.check_every", "integer >= 1"),
    "sigma_star a string": ({"task": {"sigma_star": "12"}}, (), "task.sigma_star", "list of numbers > 0"),
    "sigma_star empty": ({"task": {"sigma_star": []}}, (), "task.sigma_star", "non-empty"),
    "sigma_star <= 0": ({"task": {"sigma_star": [3.0, 0.0]}}, (), "task.sigma_star", "> 0"),
    # axes values
    "empty axis": ({"axes": {"lr": []}}, (), "axes.lr", "empty axis"),
    "sigma0 zero": ({"axes": {"sigma0": [0.1, 0.0]}}, (), "axes.sigma0", "sigma0 > 0"),
    "sigma0 negative": ({"axes": {"sigma0": [-1e-3]}}, (), "axes.sigma0", "sigma0 > 0"),
    "sigma0 underflows float32": ({"axes": {"sigma0": [1e-3, 1e-40]}}, (), "axes.sigma0", "underflows float32"),
    "sigma0 logspace underflows float32": ({"axes": {"sigma0": {"logspace": [-42, -1], "num": 5}}}, (),
                                           "axes.sigma0", "underflows float32"),
    "depth zero": ({"axes": {"depth": [0, 1]}}, (), "axes.depth", "integers >= 1"),
    "depth negative": ({"axes": {"depth": [-2]}}, (), "axes.depth", "integers >= 1"),
    "depth non-integer": ({"axes": {"depth": [1, 2.5]}}, (), "axes.depth", "integers >= 1"),
    "lr zero": ({"axes": {"lr": [0.0]}}, (), "axes.lr", "lr > 0"),
    "lr negative": ({"axes": {"lr": [1e-3, -1e-3]}}, (), "axes.lr", "lr > 0"),
    "seed axis negative": ({"axes": {"seed": [0, -1]}}, (), "axes.seed", "integers >= 0"),
    # an axis value twice would run the same trajectories twice
    "sigma0 duplicate": ({"axes": {"sigma0": [0.1, 0.1]}}, (), "axes.sigma0", "duplicate value 0.1 (of [0.1, 0.1])"),
    "depth duplicate": ({"axes": {"depth": [1, 2, 2]}}, (), "axes.depth", "duplicate value 2"),
    "seed duplicate": ({"axes": {"seed": [3, 3]}}, (), "axes.seed", "duplicate value 3"),
    "lr range duplicate": ({"axes": {"lr": {"logspace": [-2, -2], "num": 2}}}, (), "axes.lr", "duplicate value 0.01"),
    "sigma0 equal in float32": ({"axes": {"sigma0": [0.1, 0.1 + 1e-12]}}, (), "axes.sigma0",
                                f"values 0.1 and {0.1 + 1e-12!r} are equal in float32"),
    # record
    "level zero": ({"record": {"levels": [0.0, 0.5]}}, (), "record.levels", "(0, 1]"),
    "level above one": ({"record": {"levels": [0.5, 1.5]}}, (), "record.levels", "(0, 1]"),
    "levels not a list": ({"record": {"levels": 0.5}}, (), "record.levels", "(0, 1]"),
    "level a string": ({"record": {"levels": ["half"]}}, (), "record.levels", "(0, 1]"),
    "bad schedule": ({"record": {"schedule": "exponential"}}, (), "record.schedule", "'log'"),
    "bad dtype": ({"dtype": "float16"}, (), "dtype", "float32"),
    "dtype not a string": ({"dtype": 32}, (), "dtype", "float64"),
    # missing required keys
    "missing name": ({}, ("name",), "name", "missing"),
    "missing model": ({}, ("model",), "model", "missing"),
    "missing steps": ({}, ("steps",), "steps", "missing"),
    "missing task": ({}, ("task",), "task", "missing"),
    "missing axes": ({}, ("axes",), "axes", "missing"),
    "missing axis depth": ({}, ("axes.depth",), "axes.depth", "missing"),
    "missing axis sigma0": ({}, ("axes.sigma0",), "axes.sigma0", "missing"),
    "missing axis lr": ({}, ("axes.lr",), "axes.lr", "missing"),
    "missing sigma_star": ({}, ("task.sigma_star",), "task.sigma_star", "missing"),
    # malformed {logspace = [a, b], num = n}
    "range one bound": ({"axes": {"sigma0": {"logspace": [-3], "num": 4}}}, (), "axes.sigma0.logspace",
                        "two finite numbers"),
    "range string bounds": ({"axes": {"sigma0": {"logspace": ["a", "b"], "num": 4}}}, (), "axes.sigma0.logspace",
                            "two finite numbers"),
    "range bounds not a list": ({"axes": {"sigma0": {"linspace": 0.1, "num": 4}}}, (), "axes.sigma0.linspace",
                                "two finite numbers"),
    "range without num": ({"axes": {"sigma0": {"logspace": [-3, -1]}}}, (), "axes.sigma0.num", "integer >= 1"),
    "range num zero": ({"axes": {"sigma0": {"logspace": [-3, -1], "num": 0}}}, (), "axes.sigma0.num",
                       "integer >= 1"),
    "range num a float": ({"axes": {"sigma0": {"logspace": [-3, -1], "num": 2.5}}}, (), "axes.sigma0.num",
                          "integer >= 1"),
    "range two kinds": ({"axes": {"sigma0": {"logspace": [-3, -1], "linspace": [0.1, 1], "num": 3}}}, (),
                        "axes.sigma0", "logspace = [a, b], num = n"),
    "range unknown key": ({"axes": {"sigma0": {"logspace": [-3, -1], "num": 3, "base": 2}}}, (),
                          "axes.sigma0", "logspace = [a, b], num = n"),
    "range no kind": ({"axes": {"sigma0": {"num": 3}}}, (), "axes.sigma0", "logspace = [a, b], num = n"),
}


@pytest.mark.parametrize("case", ERRORS, ids=list(ERRORS))
def test_spec_error_names_file_key_and_expectation(write_spec, case):
    changes, drop, key, expected = ERRORS[case]
    path = write_spec(changes, drop=drop)
    with pytest.raises(SpecError) as info:
        spec.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    assert f"key '{key}'" in message, message
    assert expected in message, message
    assert "overrides" not in message, message


def test_values_equal_only_in_float32_are_distinct_in_float64():
    """0.1 and 0.1 + 1e-12 round to the same float32 (spacing ~7e-9 there) but not float64."""
    sweep = spec.resolve(merged(SMALL, {"dtype": "float64", "axes": {"sigma0": [0.1, 0.1 + 1e-12]}}))
    assert sweep.axes["sigma0"].tolist() == [0.1, 0.1 + 1e-12]


def test_spec_error_from_resolve_names_its_source():
    raw = merged(SMALL, {"axes": {"lr": []}})
    with pytest.raises(SpecError, match=r"^<memory>: key 'axes.lr': empty axis"):
        spec.resolve(raw)
    with pytest.raises(SpecError, match=r"^here\.toml: key 'axes.lr'"):
        spec.resolve(raw, source="here.toml")


def test_missing_file_and_invalid_toml(tmp_path):
    with pytest.raises(SpecError, match="no such spec file"):
        spec.load(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \nsteps = 3\n")
    with pytest.raises(SpecError) as info:
        spec.load(bad)
    assert str(info.value).startswith(f"{bad}: not valid TOML"), info.value


@pytest.mark.parametrize("model, key", [(["toy"], "model"), ({"kind": "toy"}, "model.class")])
def test_model_of_wrong_type_is_a_spec_error(write_spec, model, key):
    """A list is no model; a [model] table is a model of the user's own and needs its `class`."""
    path = write_spec({"model": model})
    with pytest.raises(SpecError, match=rf"key '{key}'"):
        spec.load(path)


def test_steps_beyond_int32_are_a_spec_error():
    """The engine counts steps in int32: a larger `steps` would wrap, not run."""
    with pytest.raises(SpecError, match=r"key 'steps'"):
        spec.resolve(merged(SMALL, {"steps": 3_000_000_000}))
    assert spec.resolve(merged(SMALL, {"steps": 2**31 - 2})).steps == 2**31 - 2


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_huge_depth_is_a_spec_error():
    with pytest.raises(SpecError, match=r"key 'axes.depth'"):
        spec.resolve(merged(SMALL, {"axes": {"depth": [1e30]}}))


# ----------------------------------------------------------------------------- valid specs


def test_example_spec_resolves_with_defaults():
    sweep = spec.load(EXAMPLE)
    assert sweep.name == "toy-threshold" and sweep.model == "toy" and sweep.steps == 100_000
    assert sweep.dtype == "float32" and sweep.seed == 0
    assert list(sweep.axes) == ["depth", "sigma0", "lr"]
    assert sweep.axes["depth"].tolist() == [1, 2, 3, 4, 5, 6]
    assert sweep.axes["depth"].dtype == np.int64
    np.testing.assert_array_equal(sweep.axes["sigma0"], np.logspace(-6, -0.5, 56))
    assert sweep.axes["lr"].tolist() == [1e-3]
    assert sweep.task["sigma_star"] == (12.0, 6.0, 4.0, 3.0)
    assert sweep.record == spec.Record("log", 200, (0.05, 0.5, 0.95))
    assert sweep.stop == spec.Stop()
    assert sweep.source == str(EXAMPLE)


def test_axis_forms(write_spec):
    sweep = spec.load(write_spec({"axes": {"depth": 2, "sigma0": {"linspace": [0.1, 0.4], "num": 4},
                                           "lr": [1, 2e-3], "seed": [0, 1, 2]},
                                  "record": {"levels": [0.9, 0.1, 0.9]}}))
    assert sweep.axes["depth"].tolist() == [2]                            # a scalar is a one-value axis
    np.testing.assert_allclose(sweep.axes["sigma0"], [0.1, 0.2, 0.3, 0.4])
    assert sweep.axes["lr"].dtype == np.float64 and sweep.axes["lr"].tolist() == [1.0, 2e-3]
    assert sweep.axes["seed"].tolist() == [0, 1, 2]
    assert list(sweep.axes) == ["depth", "sigma0", "lr", "seed"]
    assert sweep.record.levels == (0.1, 0.9)                              # sorted, duplicates dropped
    # integral floats are fine for depth
    assert spec.resolve(merged(SMALL, {"axes": {"depth": [1.0, 3.0]}})).axes["depth"].tolist() == [1, 3]


def test_levels_that_share_a_hit_column_are_an_error():
    """hit columns are named by 100 * level with %g: levels that print alike would collide."""
    with pytest.raises(SpecError, match=r"key 'record.levels'"):
        spec.resolve(merged(SMALL, {"record": {"levels": [0.5, 0.5 + 1e-12]}}))
    assert spec.resolve(merged(SMALL, {"record": {"levels": [0.5, 0.501]}})).record.levels == (0.5, 0.501)


def test_sigma0_underflow_depends_on_dtype():
    """1e-40 is below float32's smallest normal (1.18e-38) but fine in float64."""
    tiny32 = float(np.finfo(np.float32).tiny)
    with pytest.raises(SpecError) as info:
        spec.resolve(merged(SMALL, {"axes": {"sigma0": [1e-40]}}), source="f.toml")
    assert "key 'axes.sigma0'" in str(info.value) and "float32" in str(info.value)
    assert "float64" in str(info.value)                                  # says what to do
    sweep = spec.resolve(merged(SMALL, {"dtype": "float64", "axes": {"sigma0": [1e-40]}}))
    assert sweep.axes["sigma0"].tolist() == [1e-40]
    # just above the smallest normal is accepted in float32
    assert spec.resolve(merged(SMALL, {"axes": {"sigma0": [tiny32 * 1.01]}})).dtype == "float32"
    with pytest.raises(SpecError, match="underflows float64") as info:
        spec.resolve(merged(SMALL, {"dtype": "float64", "axes": {"sigma0": [1e-310]}}))
    assert str(info.value).endswith("; use a larger sigma0")               # float64 is already in use


# ----------------------------------------------------------------------------- --set overrides


def test_overrides_are_parsed_as_toml(write_spec):
    path = write_spec()
    before = path.read_text()
    sweep = spec.load(path, ["steps=20000", "axes.lr=[1e-3]", "axes.sigma0.num=5", "dtype=float64",
                             "record.levels=[0.25]", "stop.check_every = 16", "task.sigma_star=[2, 1.5]"])
    assert sweep.steps == 20000
    assert sweep.axes["lr"].tolist() == [1e-3]
    np.testing.assert_array_equal(sweep.axes["sigma0"], np.logspace(-3, -1, 5))   # bounds from the file
    assert sweep.dtype == "float64"                                               # bare word -> string
    assert sweep.record.levels == (0.25,)
    assert sweep.stop.check_every == 16
    assert sweep.task["sigma_star"] == (2.0, 1.5)
    assert path.read_text() == before                                             # the file is not touched
    # overrides can add keys the file does not have
    assert spec.load(path, ["axes.seed=[3, 4]", "seed=7"]).axes["seed"].tolist() == [3, 4]


def override_error(path, override: str) -> str:
    """The message of the SpecError that loading `path` with one `--set` override raises."""
    with pytest.raises(SpecError) as info:
        spec.load(path, [override])
    return str(info.value)


@pytest.mark.parametrize("override, key, expected", [
    ("steps=0", "steps", "integer >= 1"),
    ("steps=many", "steps", "integer >= 1"),
    ("axes.lr=[-1e-3]", "axes.lr", "lr > 0"),
    ("axes.lr=[]", "axes.lr", "empty axis"),
    ("axes.sigma0.num=0", "axes.sigma0.num", "integer >= 1"),
    ("axes.sigma0=[1e-40]", "axes.sigma0", "underflows float32"),
    ("axes.depth=[0.5]", "axes.depth", "integers >= 1"),
    ("record.levels=[2]", "record.levels", "(0, 1]"),
    ("record.schedule=cubic", "record.schedule", "'log'"),
    ("dtype=float16", "dtype", "float32"),
    ("colour=1", "colour", "unknown key"),
    ("axes.width=[2]", "axes.width", "unknown key"),
    ("stop.patience=3", "stop.patience", "unknown key"),
])
def test_errors_in_overridden_keys_say_so(write_spec, override, key, expected):
    path = write_spec()
    message = override_error(path, override)
    assert message.startswith(f"{path}: key '{key}' (from overrides=[{override!r}]): "), message
    assert expected in message, message


def test_error_in_a_key_not_overridden_is_not_blamed_on_set(write_spec):
    path = write_spec({"axes": {"lr": [0.0]}})
    with pytest.raises(SpecError) as info:
        spec.load(path, ["steps=50"])
    assert "key 'axes.lr': " in str(info.value) and "overrides" not in str(info.value)


@pytest.mark.parametrize("override, expected", [
    ("steps", "expected KEY=VALUE"),
    ("=3", "expected KEY=VALUE"),
    ("steps.every=3", "'steps' is not a table"),
    ("axes.depth.num=3", "'depth' is not a table"),
])
def test_malformed_overrides(write_spec, override, expected):
    path = write_spec()
    message = override_error(path, override)
    assert message.startswith(f"{path}: overrides=[{override!r}]: "), message
    assert expected in message, message


def test_error_caused_by_overriding_a_sub_key_says_so(write_spec):
    with pytest.raises(SpecError, match=r"\(from overrides=\['axes.sigma0.logspace=\[-45, -40\]'\]\)"):
        spec.load(write_spec(), ["axes.sigma0.logspace=[-45, -40]"])


@pytest.mark.parametrize("counts, message", [
    ({"chunk_size": 0}, "chunk_size=0: expected an integer >= 1"),
    ({"chunk_size": 4, "max_chunks": 2.5}, "max_chunks=2.5: expected an integer >= 1"),
])
def test_check_counts_names_the_parameter(counts, message):
    with pytest.raises(SpecError, match=rf"^{message}$"):
        spec.check_counts(counts)
    spec.check_counts({"chunk_size": None, "max_chunks": 1})


@pytest.mark.parametrize("bounds, warned", [([1e-6, 0.3], True), ([0.001, 0.1], True), ([-6, -1], False),
                                            ([-0.5, 0.5], False), ([0, 1], False)])
def test_logspace_bounds_that_look_like_values_warn(write_spec, bounds, warned):
    """logspace bounds are exponents of 10: both strictly between 0 and 1 give values between 1 and
    10, less than a decade, which is what values meant as sigma0 = 1e-6 .. 0.3 become: a
    DlsweepWarning naming the key, the values it gives and the exponents of the values written."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sweep = spec.load(write_spec(), [f"axes.sigma0={{logspace = {bounds}, num = 3}}"])
    np.testing.assert_allclose(sweep.axes["sigma0"], np.logspace(*bounds, 3), rtol=1e-6)     # float32 values
    ours = [w for w in caught if w.category is DlsweepWarning]
    assert len(ours) == int(warned)
    if warned:
        message = str(ours[0].message)
        assert "key 'axes.sigma0.logspace'" in message and "exponents of 10" in message, message
        assert f"logspace = [{np.log10(bounds[0]):.4g}, {np.log10(bounds[1]):.4g}]" in message, message


# ----------------------------------------------------------------------------- a seed axis without randomness

SWEEPS = ROOT / "sweeps"


@pytest.mark.parametrize("bundled, overrides, identical", [
    ("toy-threshold", [], True),                                             # no data, w(0) = sigma0^(1/N)
    ("matrix-sensing", ["task.init=identity", "task.measurements=0"], True),  # population loss, W(0) = a I
    ("matrix-sensing", ["task.init=identity"], False),                       # measurements drawn per seed
    ("matrix-sensing", ["task.measurements=0"], False),                      # Gaussian init from the run's key
    ("gissin-fig1b", ["task.examples=0", "task.bias=false"], False),         # Haar-random init
    ("linear-net-phase", [], True),                                          # population data, aligned init
    ("linear-net-phase", ["task.init=gaussian"], False),
    ("hacohen-fig2", ["task.init=aligned"], True),                           # the same digits for every seed
    ("hacohen-fig2", ["task.init=aligned", "task.shuffle=true"], False),     # labels shuffled per seed
])
def test_seed_axis_over_a_model_without_randomness_warns(bundled, overrides, identical):
    sweep = spec.load(SWEEPS / f"{bundled}.toml", [*overrides, "axes.seed=[0, 1, 2]"])
    program, _, task = api.compile_inputs(sweep)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec.warn_if_seeds_identical(sweep, program.model, task)
    assert [w.category for w in caught] == ([DlsweepWarning] if identical else [])
    if identical:
        message = str(caught[0].message)
        assert message.startswith(f"{sweep.source}: key 'axes.seed': 3 values"), message
        assert "identical copies" in message and "drop the seed axis" in message, message


def test_one_seed_never_warns():
    sweep = spec.resolve(merged(SMALL, {"axes": {"seed": [4]}}))
    program, _, task = api.compile_inputs(sweep)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spec.warn_if_seeds_identical(sweep, program.model, task)


# ----------------------------------------------------------------------------- hash and round trip


def test_spec_hash_is_canonical():
    base = spec.resolve(SMALL).spec_hash()
    same = [
        merged(SMALL, {"axes": {"lr": 5e-2}}),                                       # scalar axis
        merged(SMALL, {"axes": {"sigma0": np.logspace(-3, -1, 4).tolist()}}),       # explicit list
        merged(SMALL, {"record": {"levels": [0.95, 0.5, 0.05, 0.5]}}),               # the default levels
        merged(SMALL, {"seed": 0, "stop": {"rel_loss": 1e-6}}),                      # explicit defaults
        dict(reversed(list(SMALL.items()))),                                         # key order
    ]
    for raw in same:
        assert spec.resolve(raw, source="elsewhere.toml").spec_hash() == base, raw
    different = [
        {"steps": 401}, {"dtype": "float64"}, {"seed": 1}, {"name": "other"},
        {"axes": {"lr": [5e-2, 1e-2]}}, {"axes": {"depth": [1, 2]}},
        {"record": {"points": 24}}, {"record": {"schedule": "linear"}}, {"record": {"levels": [0.5]}},
        {"stop": {"check_every": 32}}, {"task": {"sigma_star": [3.0, 1.5]}},
    ]
    hashes = {spec.resolve(merged(SMALL, changes)).spec_hash() for changes in different}
    assert base not in hashes and len(hashes) == len(different)


def _assert_round_trip(sweep: spec.Sweep, tmp_path: Path) -> None:
    path = tmp_path / "sweep.toml"
    path.write_text(sweep.to_toml())
    for name, content in sweep.folder_files().items():       # as a run folder keeps them
        (tmp_path / name).write_bytes(content)
    again = spec.load(path)
    assert again.to_dict() == sweep.to_dict()
    assert again.spec_hash() == sweep.spec_hash()
    for name, values in sweep.axes.items():
        assert again.axes[name].dtype == values.dtype
        np.testing.assert_array_equal(again.axes[name], values)


def test_resolved_spec_round_trips_through_toml(tmp_path):
    _assert_round_trip(spec.load(EXAMPLE), tmp_path)
    _assert_round_trip(spec.load(EXAMPLE, ["dtype=float64", "axes.sigma0={logspace=[-40, -1], num=7}",
                                           "axes.seed=[0, 5]", "record.schedule=linear"]), tmp_path)


def test_every_bundled_sweep_round_trips_through_toml(tmp_path):
    """Each bundled sweep of every model family (sweeps/*.toml, the user-model example too) resolves, is written as its run
    folder's sweep.toml and loads again to the same resolved sweep: the task's derived entries
    (targets, sizes) are left out of the file and derived again, so a run folder of any family can
    be plotted and analysed later."""
    bundled = sorted((Path(__file__).parents[1] / "sweeps").glob("*.toml"))
    families = set()
    for path in bundled:
        sweep = spec.load(path)
        families.add(sweep.model)
        _assert_round_trip(sweep, tmp_path)
        assert spec.load(tmp_path / "sweep.toml").task == sweep.task
    assert families == set(models.FAMILIES) | {"two_factor.py:TwoFactor"}     # and the example of a model of one's own


def _distinct_in_float32(table: dict) -> bool:
    """Whether a {logspace | linspace = [a, b], num = n} axis has n values distinct in float32
    (a valid axis has no two equal values in either dtype)."""
    kind = "logspace" if "logspace" in table else "linspace"
    values = getattr(np, kind)(*table[kind], table["num"]).astype(np.float32)
    return len(np.unique(values)) == len(values)


raw_specs = st.fixed_dictionaries(
    {
        "name": st.text(st.characters(codec="utf-8", max_codepoint=0xFFFF, exclude_characters="/\x00",
                                      exclude_categories=("Cs",)), min_size=1, max_size=12)
                  .filter(lambda s: not s.startswith(".") and s.isprintable() and s.strip()),
        "model": st.just("toy"),
        "steps": st.integers(1, 10**7),
        "dtype": st.sampled_from(["float32", "float64"]),
        "seed": st.integers(0, 2**31 - 1),
        "task": st.fixed_dictionaries({"sigma_star": st.lists(st.floats(1e-3, 1e3), min_size=1, max_size=4)}),
        "axes": st.fixed_dictionaries(
            {
                "depth": st.lists(st.integers(1, 8), min_size=1, max_size=4, unique=True),
                "sigma0": st.one_of(
                    st.lists(st.floats(1e-30, 10.0), min_size=1, max_size=4, unique_by=np.float32),
                    st.builds(lambda a, b, n: {"logspace": [a, b], "num": n},
                              st.floats(-30, 1), st.floats(-30, 1), st.integers(1, 6)).filter(_distinct_in_float32),
                    st.builds(lambda a, b, n: {"linspace": [a, b], "num": n},
                              st.floats(1e-3, 1), st.floats(1e-3, 1), st.integers(1, 6)).filter(_distinct_in_float32),
                ),
                "lr": st.one_of(st.floats(1e-9, 1.0),
                                st.lists(st.floats(1e-9, 1.0), min_size=1, max_size=3, unique_by=np.float32)),
            },
            optional={"seed": st.lists(st.integers(0, 1000), min_size=1, max_size=3, unique=True)},
        ),
        "record": st.fixed_dictionaries(
            {},
            optional={"schedule": st.sampled_from(["log", "linear"]), "points": st.integers(2, 1000),
                      "levels": st.lists(st.integers(1, 1000), min_size=1, max_size=4)
                                  .map(lambda ks: [k / 1000 for k in ks])},
        ),
        "stop": st.fixed_dictionaries(
            {},
            optional={"rel_loss": st.floats(0, 1), "blowup": st.floats(1.5, 1e12), "check_every": st.integers(1, 500)},
        ),
    }
)


@given(raw=raw_specs)
@settings(max_examples=60, deadline=None)
def test_any_valid_spec_round_trips_through_toml(tmp_path_factory, raw):
    """What `sweep.toml` holds loads back to the same resolved spec and hash (the file path
    is built from the raw mapping, as TOML text, so it goes through the same parser)."""
    folder = tmp_path_factory.mktemp("rt")
    source = folder / "spec.toml"
    source.write_text(spec.dumps_toml(raw))
    sweep = spec.load(source)
    assert tomllib.loads(sweep.to_toml())["name"] == raw["name"]
    _assert_round_trip(sweep, folder)


def test_name_outside_the_bmp_round_trips(tmp_path):
    _assert_round_trip(spec.resolve(merged(SMALL, {"name": "toy-\U0001F600"})), tmp_path)
