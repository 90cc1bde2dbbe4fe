"""What every output format says of a site: a byte figure in its unit, a blocked weight
gradient's estimated cost, and the file and line a finding belongs to."""

import hlo_texts
import pytest
from hlo_texts import HEAD, WIDE_SHARDING, wide_gradient
from test_sites import PARAMETERS

from conftest import DATA
from find_barriers._formats.wording import costing, message, place, size
from find_barriers._program import read_hlo
from find_barriers._rules import rule_of
from find_barriers._sites import find_sites

AT_A_COLON = hlo_texts.FRAMES.replace(
    "/home/me/train.py", "/venv/lib/python3.12/site-packages/my:pkg/train.py"
).replace(
    "  ROOT t = f32[4,2]{0,1} transpose(d), dimensions={1,0}",
    '  s = f32[2,4]{1,0} custom-call(d), custom_call_target="Sharding", sharding={replicated}\n'
    "  ROOT t = f32[4,2]{0,1} transpose(s), dimensions={1,0}",
)
"""A blocked site whose user's line is in a file with a colon in its path, ``my:pkg/train.py``
(installed, so read the same from any working directory), at line 58."""


@pytest.mark.parametrize(
    ("nbytes", "shown"),
    [
        (999, "999 B"),
        (1000, "1.0 kB"),
        (1e6, "1.0 MB"),
        (1_350_000, "1.4 MB"),
        (1e9, "1.00 GB"),
        (2_345_000_000, "2.35 GB"),
    ],
)
def test_a_byte_figure_takes_the_next_unit_at_each_thousand(nbytes, shown):
    """Exactly 1,000 bytes are a kB, a million an MB, a billion a GB; each divided exactly."""
    assert size(nbytes) == shown


def test_a_cost_of_copies_and_a_lost_reduce_scatter_gives_both_figures():
    """The head sharded on its 512 rows: six copies and the wire bytes of the all-reduce."""
    (site,) = find_sites(read_hlo(HEAD.replace("EMB", "512")))
    words = costing(site)
    assert site.cost.relayout_copies == 6
    assert f"{site.cost.relayout_copies} " in words
    assert size(site.cost.lost_reduce_scatter_bytes) in words
    assert size(site.cost.bytes) in words


TIED = (
    HEAD.replace("EMB", "512")
    .replace(
        "  m = bf16[512,32000]{1,0} add(mu, t)",
        "  z = bf16[512,32000]{1,0} broadcast(), dimensions={}\n"
        "  ids = s32[8,1]{1,0} parameter(5)\n"
        "  rows = bf16[8,32000]{1,0} parameter(6)\n"
        "  lookup = bf16[512,32000]{1,0} scatter(z, ids, rows), update_window_dims={1}, "
        "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
        "to_apply=main\n"
        "  grad = bf16[512,32000]{1,0} add(t, lookup)\n"
        "  m = bf16[512,32000]{1,0} add(mu, grad)",
    )
    .replace("devices=[4,1]<=[4]", "devices=[1,4]<=[4]")
)
"""A tied table: the head's gradient, sharded on the vocabulary, added to the lookup's scatter
before the update (summed, §4.6)."""


def test_no_cost_summed_and_no_cost_stacked_are_told_apart():
    """A tied table's gradient (summed, §4.6) and a scanned layer's (stacked, §4.7) both cost
    nothing, for different reasons: the words differ beyond the section they cite."""
    (summed,) = find_sites(read_hlo(TIED))
    stacked = find_sites(read_hlo((DATA / "scanned.hlo.txt").read_text()))[0]
    assert (summed.cost.bytes, summed.cost.basis) == (0, ("4.6",))
    assert (stacked.cost.bytes, stacked.cost.basis[0]) == (0, "4.7")
    assert costing(summed).replace("4.6", "") != costing(stacked).replace("4.7", "")


UNUSED_GRADIENT = PARAMETERS.replace(
    "  t = f32[3,4]{0,1} transpose(d), dimensions={1,0}",
    '  s = f32[4,3]{1,0} custom-call(d), custom_call_target="Sharding", sharding={replicated}\n'
    "  t = f32[3,4]{0,1} transpose(s), dimensions={1,0}",
)
"""``w``'s gradient, named by its forward dot, blocked, reaching no output: nothing to copy."""
FREE = {
    "4.6": (TIED, "its gradient is summed with another gradient first"),
    "4.7": ((DATA / "scanned.hlo.txt").read_text(), "its gradient is stacked in a loop"),
    "4.1": (
        HEAD.replace("EMB", "2048").replace("32000", "50257"),
        "TPU keeps the one of its dimensions that fills whole tiles minor-most",
    ),
    "4.3": (UNUSED_GRADIENT, "no output of the step holds its elements to copy"),
}
"""A module whose first blocked weight gradient the estimate prices at nothing, by the section
that says why, and the words for it: the head's shard of 512 rows by 50,257 columns keeps its
rows, whole tiles, minor-most (§4.1), and at 1,024 bytes a row it keeps its reduce-scatter."""


@pytest.mark.parametrize("section", FREE)
def test_a_weight_gradient_of_no_cost_says_why_by_its_first_section(section):
    """Each reason an FB005 site costs nothing has its own words and cites its own section."""
    text, why = FREE[section]
    site = next(site for site in find_sites(read_hlo(text)) if site.blocked)
    assert (site.cost.bytes, site.cost.basis[0], rule_of(site).code) == (0, section, "FB005")
    assert costing(site) == f"no cost by the estimate: {why} (§{section})"
    assert message(site).startswith("Blocked fold: ")
    assert f" (no cost by the estimate: {why} (§{section})). Fix: " in message(site)


@pytest.mark.parametrize(("head_dim", "rule"), [(128, "FB001"), (64, "FB005")])
def test_a_pinned_sites_message_says_pinned_layout_whatever_its_cost(head_dim, rule):
    """The output projection's gradient, pinned: its message opens ``Pinned layout:``, priced
    (FB001) or, with heads of 64, of no cost (FB005: its shard ``[8, 64, 128]`` keeps the
    embedding, whole tiles, minor-most, §4.1)."""
    text = wide_gradient("out", WIDE_SHARDING, last="s").replace("128", str(head_dim))
    (site,) = find_sites(read_hlo(text))
    assert (site.verdict, rule_of(site).code) == ("pinned", rule)
    assert message(site).startswith(
        f"Pinned layout: weight gradient of params['w'], dot bf16[512,8,{head_dim}] -> Sharding"
        f" -> transpose bf16[8,{head_dim},512] ({costing(site)}). Fix: "
    )
    assert ("§4.1" in costing(site)) is (rule == "FB005")


def test_a_site_is_placed_at_its_users_line_else_at_its_modules_file():
    """A file path with a colon stays whole; a site with no frame is at the module's file."""
    (at_a_colon,) = find_sites(read_hlo(AT_A_COLON))
    assert place("m.hlo.txt", at_a_colon) == ("my:pkg/train.py", 58)
    (no_frame,) = find_sites(read_hlo(HEAD.replace("EMB", "512")))
    assert place("m.hlo.txt", no_frame) == ("m.hlo.txt", None)
