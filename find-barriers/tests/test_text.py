"""``--format text``, the layout a linter's reader scans: each module's header with its counts,
its sites in order (blocked first, those of unknown cost, then the costliest), each rule's fix
line once, the stale baseline entries, the position note, and the run's total line."""

import shutil

import hlo_texts
import pytest
from hlo_texts import WIDE_SHARDING, wide_gradient

from find_barriers._formats.wording import size

SITE_INDENT = " " * 16
"""Where the lines under a site's own line begin."""


def module_file(folder, name, text):
    """``text`` written as the HLO file ``name`` in ``folder``."""
    path = folder / name
    path.write_text(text)
    return path


def headers(out):
    """The lines that open a module's listing or the stale entries: ``path: ...``."""
    lines = out.splitlines()[:-1]  # the last is the run's total
    return [line for line in lines if not line.startswith((" ", "FB0", "note: "))]


def site_rows(out):
    """Each listed site's own line, as (its rule column, the line)."""
    rows = [
        line
        for line in out.splitlines()
        if line.startswith("  ") and not line.startswith(SITE_INDENT)
    ]
    return [(row[2:7].strip(), row) for row in rows]


def fix_codes(out):
    """The rules whose fix line the text gives, in order."""
    return [line.split()[0] for line in out.splitlines() if line.startswith("FB0")]


def test_blocked_sites_of_unknown_cost_come_first_the_priced_one_last(run, tmp_path):
    """The six blocked sites of ``ROLES``: five of unknown cost, in their order, then the one
    priced (``params['w']``), though it is the first found."""
    _, out, _ = run(module_file(tmp_path, "roles.hlo.txt", hlo_texts.ROLES))
    rows = site_rows(out)
    assert [code for code, _ in rows] == ["FB001", "FB003", "FB003", "FB001", "FB003", "FB001"]
    assert "params['w']" in rows[-1][1]
    assert all("params['w']" not in row for _, row in rows[:-1])


def test_verbose_lists_the_blocked_sites_before_the_foldable_one(data, run):
    """``jax_checkpoint`` finds its foldable site first; the verbose listing puts it last."""
    _, out, _ = run(data / "jax_checkpoint.hlo.txt", "--verbose")
    assert [code for code, _ in site_rows(out)] == ["FB005", "FB005", "FB005", ""]


def test_verbose_gives_a_kept_site_its_reason_and_a_foldable_one_a_line_alone(run, tmp_path):
    """``SITES``: a blocked site and two kept ones have a line under them, the foldable one
    none; a site no rule covers leaves the rule column blank."""
    _, out, _ = run(module_file(tmp_path, "sites.hlo.txt", hlo_texts.SITES), "--verbose")
    lines = out.splitlines()[1:]
    owned = [line.startswith(SITE_INDENT) for line in lines[:7]]
    assert owned == [False, True, False, True, False, True, False]
    assert [code for code, _ in site_rows(out)] == ["FB001", "", "", ""]
    assert lines[6].startswith("  " + " " * 5 + " foldable")


def test_a_constraint_of_no_known_line_is_placed_at_a_question_mark(run, tmp_path):
    """A ``with_sharding_constraint`` whose call has no stack: the line under its site says so
    with ``?`` where the line would be."""
    text = hlo_texts.SITES.replace(
        'custom-call(d1), custom_call_target="Sharding", sharding={replicated}',
        'custom-call(d1), custom_call_target="Sharding", sharding={replicated}, '
        'metadata={op_name="jit(step)/sharding_constraint"}',
    )
    _, out, _ = run(module_file(tmp_path, "constrained.hlo.txt", text))
    ((code, _),) = site_rows(out)
    placed = next(line for line in out.splitlines() if line.startswith(SITE_INDENT))
    assert (code, placed.endswith(" at ?")) == ("FB002", True)


def test_verbose_gives_each_modules_estimated_cost_in_its_header(data, run):
    """Three layers of 16,384 bytes each: the header gives the module's 49.2 kB."""
    _, out, _ = run(data / "three_layers.hlo.txt", "--verbose")
    assert size(3 * 16384) in headers(out)[0]


def test_new_and_below_sites_are_counted_apart_in_the_header_and_the_total(data, run):
    """``nnx_tied`` under ``--min-bytes 1``: its tied table costs nothing by the estimate (below),
    its two projections 64.5 kB each (new)."""
    path = data / "nnx_tied.hlo.txt"
    status, out, _ = run(path, "--min-bytes", "1")
    assert headers(out)[0] == f"{path}: blocked sites: 2 new, 1 below"
    assert "3 blocked (2 new, 1 below)" in out.splitlines()[-1]
    assert status == 1


def test_a_module_with_nothing_to_report_does_not_end_the_listing(data, run):
    """The fixed scan blocks nothing; the constrained step after it is still listed."""
    fixed, constrained = data / "scanned_fixed.hlo.txt", data / "constrained.hlo.txt"
    _, out, _ = run(fixed, constrained)
    assert headers(out)[0].startswith(f"{constrained}: ")
    assert [code for code, _ in site_rows(out)] == ["FB002", "FB002"]


def test_a_module_dumped_twice_is_listed_once_and_the_rest_after_it(data, run, tmp_path):
    """The same constrained step in two files, then the scan: the copy adds nothing, the modules
    around it are listed."""
    first, again = tmp_path / "a.hlo.txt", tmp_path / "b.hlo.txt"
    shutil.copy(data / "constrained.hlo.txt", first)
    shutil.copy(data / "constrained.hlo.txt", again)
    scanned = data / "scanned.hlo.txt"
    _, out, _ = run(first, again, scanned)
    assert [line.split(": ")[0] for line in headers(out)] == [str(first), str(scanned)]
    assert [code for code, _ in site_rows(out)] == ["FB002"] * 2 + ["FB005"] * 3


def test_each_rule_listed_in_any_module_gets_its_fix_line_once(data, run):
    """Weight gradients of no cost in one module and a constraint in the next: both rules'
    fixes, by rule."""
    _, out, _ = run(data / "jax_checkpoint.hlo.txt", data / "constrained.hlo.txt")
    assert fix_codes(out) == ["FB002", "FB005"]


def test_stale_entries_follow_the_sites_and_bring_their_rules_fix(data, run, tmp_path):
    """A baseline of the three layers read against the constrained step of the same module
    name: its two sites are listed, then the three entries left, then FB002's and FB004's
    fixes."""
    baseline = tmp_path / "b.json"
    run(data / "three_layers.hlo.txt", "--write-baseline", baseline)
    constrained = data / "constrained.hlo.txt"
    _, out, _ = run(constrained, "--baseline", baseline)
    assert [line.split(": ")[0] for line in headers(out)] == [str(constrained), str(baseline)]
    assert [code for code, _ in site_rows(out)] == ["FB002"] * 2 + ["FB004"] * 3
    assert fix_codes(out) == ["FB002", "FB004"]


def test_the_position_note_is_of_the_sites_listed(data, run, tmp_path):
    """Sites named by position, all accepted: no note, but with ``--verbose``, which lists them;
    sites named by path never bring it."""
    baseline = tmp_path / "b.json"
    three = data / "three_layers.hlo.txt"
    run(three, "--write-baseline", baseline)

    def notes(*argv):
        return [line for line in run(*argv)[1].splitlines() if line.startswith("note: ")]

    assert notes(three, "--baseline", baseline) == []
    (note,) = notes(three, "--baseline", baseline, "--verbose")
    assert "model.states[0][1], model.states[0][3], ..." in note
    assert notes(data / "jax_checkpoint.hlo.txt", "--verbose") == []


def test_quiet_names_the_via_line_only_where_a_site_has_one(data, run):
    """A constraint's site has no helper line: its quiet line ends with its chain; a layer
    through ``jax.checkpoint`` ends with the helper's line (listed under ``--min-bytes 0``: it
    costs nothing by the estimate, FB005, and ``--quiet`` lists only the new sites)."""
    argv = (data / "constrained.hlo.txt", data / "jax_checkpoint.hlo.txt", "--quiet")
    _, out, _ = run(*argv, "--min-bytes", "0")
    lines = out.splitlines()
    assert len(lines) == 5
    assert all(
        line.endswith("dot f32[8,8] -> Sharding -> transpose f32[8,8]") for line in lines[:2]
    )
    assert all(line.endswith("(via /home/user/project/patterns.py:217)") for line in lines[2:])


def wide_modules(folder, *kernels, sharding=WIDE_SHARDING):
    """A module file of each :data:`~hlo_texts.WIDE_KERNELS` ``kernels``' gradient, a
    ``Sharding`` call between (pinned) unless ``sharding`` is None (kept)."""
    ops, last = ((sharding,), "s") if sharding else ((), "d")
    return [
        module_file(folder, f"{kernel}.hlo.txt", wide_gradient(kernel, *ops, last=last))
        for kernel in kernels
    ]


def head_module(folder):
    """:data:`~hlo_texts.HEAD` at emb 512 as a module file: one blocked site, 122.9 MB."""
    return module_file(folder, "head.hlo.txt", hlo_texts.HEAD.replace("EMB", "512"))


@pytest.mark.parametrize(
    ("kernels", "head", "options", "total"),
    [
        ((), True, (), "1 blocked (1 new), 0 foldable, 0 kept"),
        (("query",), False, (), "0 blocked, 1 pinned (1 new), 0 foldable, 0 kept"),
        (("query", "out"), True, (), "1 blocked, 2 pinned (3 new), 0 foldable, 0 kept"),
        (
            ("query", "out"),
            True,
            ("--min-bytes", "3000000"),  # the query's 2.4 MB is below it, the others not
            "1 blocked, 2 pinned (2 new, 1 below), 0 foldable, 0 kept",
        ),
    ],
)
def test_the_pinned_count_is_given_only_where_a_site_is_and_takes_the_statuses(
    run, tmp_path, kernels, head, options, total
):
    """No pinned site: no pinned count, and the statuses follow the blocked count; one or more:
    the statuses of the blocked and pinned sites together follow the pinned count, in each
    module's header and in the run's total."""
    paths = [*wide_modules(tmp_path, *kernels), *([head_module(tmp_path)] if head else [])]
    _, out, _ = run(*paths, *options, "--verbose")
    assert out.splitlines()[-1].split(": ", 2)[2].startswith(f"{total}; estimated cost ")
    pinned = [True] * len(kernels) + [False] * head
    assert [" pinned" in header for header in headers(out)] == pinned


def test_a_wide_gradient_with_no_sharding_call_is_kept_and_not_counted_pinned(run, tmp_path):
    """The swap with nothing between: kept, passing, and the count of pinned sites, 0, left out."""
    status, out, _ = run(*wide_modules(tmp_path, "query", "out", sharding=None))
    assert (status, out) == (
        0,
        "2 modules: 2 transpose-of-dot sites: 0 blocked, 0 foldable, 2 kept\n",
    )


def test_verbose_labels_a_pinned_site_pinned_with_its_rule_and_cost(run, tmp_path):
    """A pinned site is listed as a finding: FB001, ``pinned`` in the verdict column where a
    blocked one says ``blocked``, its estimated cost and the call's placement under it; a kept
    one says why XLA keeps it."""
    (pinned,) = wide_modules(tmp_path, "out")
    kept = module_file(tmp_path, "kept.hlo.txt", wide_gradient("out", last="d"))
    _, out, _ = run(pinned, head_module(tmp_path), kept, "--verbose")
    rows = site_rows(out)
    assert [(code, row[8:].split()[0]) for code, row in rows] == [
        ("FB001", "pinned"),
        ("FB001", "blocked"),
        ("", "kept"),
    ]
    lines = out.splitlines()
    under = lines[lines.index(rows[0][1]) + 1]
    assert under == (
        f"{SITE_INDENT}estimated 3.1 MB a step: 6 relayout copies (§4.3); Sharding call from an "
        "explicit mesh's type"
    )
    assert lines[lines.index(rows[2][1]) + 1].startswith(
        f"{SITE_INDENT}XLA keeps this transpose in either mode: the dot's rhs has 2 "
    )
