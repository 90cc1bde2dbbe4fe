"""``--format sarif``: a result per blocked site not ignored, its level by status, its location,
and a fingerprint code scanning tracks it by; a result per stale baseline entry."""

import hashlib
import json

import hlo_texts
from hlo_texts import WIDE_SHARDING, wide_gradient
from test_wording import AT_A_COLON

from find_barriers._baseline import key, tag
from find_barriers._check import check
from find_barriers._frames import readable
from find_barriers._rules import DOCS_URL, RULES


def results(run, *argv):
    """The results of the SARIF log ``find-barriers`` writes for ``argv``."""
    _, out, _ = run(*argv, "--format", "sarif")
    return json.loads(out)["runs"][0]["results"]


def module_file(folder, name, text):
    """``text`` written as the HLO file ``name`` in ``folder``."""
    path = folder / name
    path.write_text(text)
    return path


def test_a_new_site_is_an_error_and_one_below_the_threshold_a_note(data, run):
    """``nnx_tied`` under ``--min-bytes 1``: its tied table (no cost, FB005) is below, the rest
    new."""
    found = results(run, data / "nnx_tied.hlo.txt", "--min-bytes", "1")
    assert [(r["ruleId"], r["level"]) for r in found] == [
        ("FB005", "note"),
        ("FB001", "error"),
        ("FB001", "error"),
    ]
    assert all("suppressions" not in r for r in found)


def test_fb005_is_a_rule_with_its_help_and_its_sites_are_notes_unless_min_bytes_is_0(data, run):
    """The log lists FB005 among its rules, with its name and the guide section it links; the
    scan's sites of no cost are FB005 results, ``note`` (below the default ``--min-bytes 1``)
    and not suppressed, so the log fails nothing; under ``--min-bytes 0`` they are errors."""
    status, out, _ = run(data / "scanned.hlo.txt", "--format", "sarif")
    (sarif_run,) = json.loads(out)["runs"]
    rules = sarif_run["tool"]["driver"]["rules"]
    (costless,) = [rule for rule in rules if rule["id"] == "FB005"]
    assert (costless["name"], costless["helpUri"]) == (
        "blocked-weight-gradient-at-no-cost",
        RULES["FB005"].url,
    )
    assert costless["helpUri"].startswith(DOCS_URL)
    assert costless["help"]["text"] == f"Fix: {RULES['FB005'].fix}."
    found = sarif_run["results"]
    assert [(r["ruleId"], rules[r["ruleIndex"]]["id"], r["level"]) for r in found] == [
        ("FB005", "FB005", "note")
    ] * 3
    assert all("suppressions" not in r for r in found)
    assert status == 0
    status, out, _ = run(data / "scanned.hlo.txt", "--format", "sarif", "--min-bytes", "0")
    found = json.loads(out)["runs"][0]["results"]
    assert (status, [(r["ruleId"], r["level"]) for r in found]) == (1, [("FB005", "error")] * 3)


def test_ignored_and_unblocked_sites_give_no_result_and_stop_none(data, run):
    """A foldable site before three blocked ones (FB005, no cost: stacked in a loop), and two
    constraints ignored: three results."""
    found = results(
        run, data / "jax_checkpoint.hlo.txt", data / "constrained.hlo.txt", "--ignore", "FB002"
    )
    assert [r["ruleId"] for r in found] == ["FB005"] * 3


def test_a_result_is_at_the_users_line_else_at_its_module_file_with_no_region(run, tmp_path):
    """A path with a colon stays whole, its line the region; a site with no stack is at the
    module's file, no region."""
    at_a_colon = module_file(tmp_path, "at_a_colon.hlo.txt", AT_A_COLON)
    sites = module_file(tmp_path, "sites.hlo.txt", hlo_texts.SITES)
    locations = [r["locations"] for r in results(run, at_a_colon, sites)]
    assert locations == [
        [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": "my:pkg/train.py"},
                    "region": {"startLine": 58},
                }
            }
        ],
        [{"physicalLocation": {"artifactLocation": {"uri": str(sites)}}}],
    ]


def test_an_accepted_site_is_suppressed_with_a_justification(data, run, tmp_path):
    """A baselined site's suppression: external, with the justification SARIF allows."""
    baseline = tmp_path / "b.json"
    run(data / "constrained.hlo.txt", "--write-baseline", baseline)
    found = results(run, data / "constrained.hlo.txt", "--baseline", baseline)
    suppression = {"kind": "external", "justification": "in the baseline"}
    assert [r["suppressions"] for r in found] == [[suppression]] * 2


def test_a_stale_entry_is_a_result_at_the_baseline_with_a_message(data, run, tmp_path):
    """Three layers' baseline read against the constrained step: three stale results, each
    located at the baseline and with a message that names the entry's helper."""
    baseline = tmp_path / "b.json"
    run(data / "three_layers.hlo.txt", "--write-baseline", baseline)
    stale = results(run, data / "constrained.hlo.txt", "--baseline", baseline)[2:]
    assert [(r["ruleId"], r["level"]) for r in stale] == [("FB004", "warning")] * 3
    assert all("shared_dot" in r["message"]["text"] for r in stale)
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in stale} == {
        str(baseline)
    }


def v2(identity, count):
    """The ``findBarriers/v2`` fingerprint: SHA-256 of an identity and its count among those alike."""
    return hashlib.sha256(f"{identity}#{count}".encode()).hexdigest()


def test_the_v2_fingerprint_is_the_sites_key_and_stack_or_the_entrys_numbered(data, run, tmp_path):
    """Code scanning matches alerts across runs and releases by ``findBarriers/v2``, so its
    scheme is pinned: a site's baseline key and its user's stack (``file:line`` each) as
    sorted JSON, a stale entry's tag, each numbered from 1 among those alike (``ROLES`` has two
    pairs of alike sites; the three layers' baseline, read against the constrained step of the
    same module name, leaves three alike entries)."""
    roles = module_file(tmp_path, "roles.hlo.txt", hlo_texts.ROLES)
    three = data / "three_layers.hlo.txt"
    baseline = tmp_path / "b.json"
    run(three, "--write-baseline", baseline)
    constrained = data / "constrained.hlo.txt"
    argv = (roles, constrained)
    result = check([str(path) for path in argv], baseline_file=str(baseline))
    expected, seen = [], {}
    for item in result.modules:
        for finding in item.findings:
            site = finding.site
            stack = [readable(frame) for frame in site.user_stack]
            identity = json.dumps([key(item.module, site), stack], sort_keys=True)
            seen[identity] = seen.get(identity, 0) + 1
            expected.append(v2(identity, seen[identity]))
    expected += [v2(tag(entry), n) for n, entry in enumerate(result.stale, start=1)]
    assert len(result.stale) == 3
    assert len(set(map(tag, result.stale))) == 1
    found = results(run, *argv, "--baseline", baseline)
    assert [r["partialFingerprints"]["findBarriers/v2"] for r in found] == expected
    assert len(set(expected)) == len(expected) == 6 + 2 + 3


def test_a_pinned_sites_message_says_pinned_layout_and_a_blocked_ones_blocked_fold(run, tmp_path):
    """The query's gradient, pinned, and the head's, blocked: both FB001 errors, each message
    opening with what the ``Sharding`` call does to it."""
    query = module_file(tmp_path, "query.hlo.txt", wide_gradient("query", WIDE_SHARDING, last="s"))
    head = module_file(tmp_path, "head.hlo.txt", hlo_texts.HEAD.replace("EMB", "512"))
    found = results(run, query, head)
    assert [(r["ruleId"], r["level"], r["message"]["text"].split(": ")[0]) for r in found] == [
        ("FB001", "error", "Pinned layout"),
        ("FB001", "error", "Blocked fold"),
    ]
    assert "3 relayout copies (§4.3)" in found[0]["message"]["text"]
