"""find-barriers on a user's own transformer (tests/own_transformer.py), as issue 33 asks: every
site at the user's line with its parameter, green after the flagship guide's fixes, and a
baseline that fails only a new layer."""

import json
import re
from pathlib import Path

import pytest

from find_barriers import main
from tests import own_transformer

pytestmark = pytest.mark.needs_devices(4)  # the 2x2 mesh
MODEL = Path(own_transformer.__file__)
LINES = MODEL.read_text().splitlines()


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """XLA's dump of one training step: as written, with the fixes, and with one more layer."""
    made = tmp_path_factory.mktemp("own")
    return {
        "as written": own_transformer.dump(made / "plain"),
        "fixed": own_transformer.dump(made / "fixed", fixed=True),
        "one more layer": own_transformer.dump(made / "extra", extra=True),
    }


def run(capsys, *argv) -> tuple[int, list[dict]]:
    """``find-barriers --format json ARGV``: exit status and every site."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--format", "json", *map(str, argv)])
    status = exit_info.value.code
    document = json.loads(capsys.readouterr().out)
    return status, [site for module in document["modules"] for site in module["sites"]]


def code_at(site: dict) -> str:
    """The user's line of a site, as written in the model's file."""
    file, _, line = site["user_line"].rpartition(":")
    assert Path(file).resolve() == MODEL.resolve()
    return LINES[int(line) - 1].strip()


def test_as_written_each_site_names_the_users_line_and_parameter(dumps, capsys):
    status, sites = run(capsys, dumps["as written"])
    blocked = [site for site in sites if site["verdict"] == "blocked"]
    kept = [site for site in sites if site["verdict"] == "kept"]
    assert (status, len(blocked), len(kept), len(sites)) == (1, 13, 10, 23)
    parameters = [site["parameter"] for site in blocked]
    assert all(re.fullmatch(r"model\.states\[0\]\[\d+\]", p) for p in parameters)
    assert len(set(parameters)) == 13  # q, k, v, o, up, down of two blocks, and the head
    calls = {re.search(r"self\.(\w+)\(", code_at(site))[1] for site in blocked}
    assert calls == {"q", "k", "v", "o", "up", "down", "head"}
    assert {site["role"] for site in blocked} == {"weight gradient"}
    fixes = {"FB001": "produce this weight gradient in the kernel's own order", "FB005": "nothing"}
    assert all(site["fix"].startswith(fixes[site["rule"]]) for site in blocked)
    # the MLP and head kernels, [64, 256] and [64, 128]: TPU keeps their one 128-filling side minor
    assert {site["rule"] for site in blocked} == {"FB001", "FB005"}
    # XLA keeps these transposes in either mode, so the gate does not fail on them: the einsums'
    # and, back through the reshape to the einsum's layout, the o projection's input gradient
    by_line = {code_at(site): site["role"] for site in kept}
    assert {line.split(" = ")[0] for line in by_line} == {"scores", "attended", "x"}
    assert by_line["x = x + self.o(attended)"] == "activation gradient"
    assert all(site["fix"].startswith("XLA keeps this transpose") for site in kept)


def test_the_flagship_guides_fixes_make_it_green(dumps, capsys):
    status, sites = run(capsys, dumps["fixed"])
    assert status == 0
    assert sum(site["verdict"] == "foldable" for site in sites) == 13


def test_a_baseline_fails_only_the_new_layer(dumps, capsys, tmp_path):
    accepted = tmp_path / "baseline.json"
    run(capsys, dumps["as written"], "--write-baseline", accepted)
    assert run(capsys, dumps["as written"], "--baseline", accepted)[0] == 0
    status, sites = run(capsys, dumps["one more layer"], "--baseline", accepted)
    new = [code_at(site) for site in sites if site["status"] == "new"]
    assert (status, new) == (1, ["x = self.extra(x)"])
