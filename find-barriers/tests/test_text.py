"""``--format text``, the layout a linter's reader scans: each module's header with its counts,
its sites in order (blocked first, those of unknown cost, then the costliest), each rule's fix
line once, the stale baseline entries, the position note, and the run's total line."""

import shutil

import hlo_texts

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
    assert [code for code, _ in site_rows(out)] == ["FB001", "FB001", "FB001", ""]


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
    assert [code for code, _ in site_rows(out)] == ["FB002"] * 2 + ["FB001"] * 3


def test_each_rule_listed_in_any_module_gets_its_fix_line_once(data, run):
    """A weight gradient in one module and a constraint in the next: both rules' fixes."""
    _, out, _ = run(data / "jax_checkpoint.hlo.txt", data / "constrained.hlo.txt")
    assert fix_codes(out) == ["FB001", "FB002"]


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
    through ``jax.checkpoint`` ends with the helper's line."""
    _, out, _ = run(data / "constrained.hlo.txt", data / "jax_checkpoint.hlo.txt", "--quiet")
    lines = out.splitlines()
    assert len(lines) == 5
    assert all(
        line.endswith("dot f32[8,8] -> Sharding -> transpose f32[8,8]") for line in lines[:2]
    )
    assert all(line.endswith("(via /home/user/project/patterns.py:217)") for line in lines[2:])
