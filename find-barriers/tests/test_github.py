"""``--format github``: one workflow command per finding, its file and line escaped as GitHub
reads a command's properties, and one per stale baseline entry at the baseline file."""

import json
import re

import hlo_texts
from hlo_texts import WIDE_SHARDING, wide_gradient
from test_wording import AT_A_COLON

from find_barriers._baseline import describe

COMMAND = re.compile(
    r"::(?P<level>\w+) file=(?P<file>[^,]*)(?:,line=(?P<line>\d+))?,title=(?P<title>[^:]+)"
    r"::(?P<message>.*)"
)
"""A workflow command, its ``line`` property optional."""


def annotations(run, *argv):
    """The exit status and each workflow command ``find-barriers --format github`` writes."""
    status, out, _ = run(*argv, "--format", "github")
    found = [COMMAND.fullmatch(line) for line in out.splitlines()]
    assert all(found), out
    return status, found


def test_a_site_of_no_known_line_is_annotated_at_its_module_file(run, tmp_path):
    """``SITES``' blocked site has no stack: its annotation is at the module's file, no line."""
    path = tmp_path / "sites.hlo.txt"
    path.write_text(hlo_texts.SITES)
    status, (found,) = annotations(run, path)
    assert (status, found["level"], found["file"], found["line"]) == (1, "error", str(path), None)


def test_a_file_path_is_escaped_as_a_property(run, tmp_path):
    """A colon in the user's file path is written ``%3A``, as in every property."""
    path = tmp_path / "at_a_colon.hlo.txt"
    path.write_text(AT_A_COLON)
    _, (found,) = annotations(run, path)
    assert (found["file"], found["line"]) == ("my%3Apkg/train.py", "58")


def test_each_blocked_site_is_annotated_after_a_foldable_one(data, run):
    """``jax_checkpoint`` finds its foldable site first, then three blocked ones (FB005, no cost:
    stacked in a loop, so notices at the default ``--min-bytes 1``, errors at 0)."""
    _, found = annotations(run, data / "jax_checkpoint.hlo.txt")
    assert [(match["level"], match["title"].split()[1]) for match in found] == [
        ("notice", "FB005")
    ] * 3
    _, found = annotations(run, data / "jax_checkpoint.hlo.txt", "--min-bytes", "0")
    assert [(match["level"], match["title"].split()[1]) for match in found] == [
        ("error", "FB005")
    ] * 3


def test_each_stale_entry_is_a_warning_at_the_baseline_naming_the_entry(data, run, tmp_path):
    """Three layers' baseline read against the constrained step of the same module name: two
    errors for its sites, then a warning per entry left, at the baseline, that describes it."""
    baseline = tmp_path / "b.json"
    run(data / "three_layers.hlo.txt", "--write-baseline", baseline)
    entries = json.loads(baseline.read_text())["sites"]
    _, found = annotations(run, data / "constrained.hlo.txt", "--baseline", baseline)
    stale = found[2:]
    assert [match["level"] for match in found] == ["error"] * 2 + ["warning"] * 3
    assert {match["file"] for match in stale} == {str(baseline).replace(":", "%3A")}
    assert all(
        describe(entry) in match["message"] for entry, match in zip(entries, stale, strict=True)
    )


def test_a_pinned_site_is_an_error_whose_message_says_pinned_layout(run, tmp_path):
    """The output projection's gradient, pinned: an error titled by FB001, its message opening
    ``Pinned layout:`` where a blocked site's opens ``Blocked fold:``."""
    path = tmp_path / "out.hlo.txt"
    path.write_text(wide_gradient("out", WIDE_SHARDING, last="s"))
    head = tmp_path / "head.hlo.txt"
    head.write_text(hlo_texts.HEAD.replace("EMB", "512"))
    status, found = annotations(run, path, head)
    assert status == 1
    assert [(m["level"], m["title"].split()[1], m["message"].split(": ")[0]) for m in found] == [
        ("error", "FB001", "Pinned layout"),
        ("error", "FB001", "Blocked fold"),
    ]
    message = found[0]["message"]
    assert message.startswith("Pinned layout: weight gradient of params['w'], dot bf16[512,8,128]")
