"""One run of the check through its API: each blocked site's status, modules dumped twice, and
what accepting every new site leaves."""

import dataclasses
import shutil
from collections import Counter

from conftest import DATA
from find_barriers import _baseline as baseline
from find_barriers import _check
from find_barriers._check import check, check_module
from find_barriers._cost import Cost
from find_barriers._dumps import Module, read_module
from find_barriers._program import read_hlo
from find_barriers._rules import rule_of
from find_barriers._vocabulary import Placement, Role, Status


def statuses(findings) -> list:
    return [finding.status for finding in findings]


def test_a_blocked_site_of_no_estimated_cost_is_below_by_default_and_new_at_min_bytes_0():
    """With no ``min_bytes`` (1), a weight gradient estimated at 0 bytes (in a loop) is FB005 and
    below: it passes the check; ``min_bytes=0`` makes it new again, failing it."""
    scanned = DATA / "scanned.hlo.txt"
    (checked,) = check([str(scanned)]).modules
    alone = check_module(read_module(str(scanned)), Counter())
    assert {site.cost.bytes for site in checked.sites if site.cost} == {0}
    assert {(site.role, rule_of(site).code) for site in checked.sites} == {
        (Role.WEIGHT_GRADIENT, "FB005")
    }
    for item in (checked, alone):
        assert (statuses(item.findings), item.new) == ([Status.BELOW] * 3, [])
    (every,) = check([str(scanned)], min_bytes=0).modules
    every_alone = check_module(read_module(str(scanned)), Counter(), min_bytes=0)
    assert statuses(every.findings) == statuses(every_alone.findings) == [Status.NEW] * 3
    assert len(every.new) == len(every_alone.new) == 3


CONSTRAINED_GRADIENT = """
HloModule jit_step

ENTRY main {
  x = f32[2,3]{1,0} parameter(0)
  w = f32[3,4]{1,0} parameter(1)
  g = f32[2,4]{1,0} parameter(2)
  y = f32[2,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/dot_general"}
  d = f32[4,3]{1,0} dot(g, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/transpose(jvp())/dot_general"}
  s = f32[4,3]{1,0} custom-call(d), custom_call_target="Sharding", sharding={replicated}, metadata={op_name="jit(step)/transpose(jvp())/sharding_constraint"}
  t = f32[3,4]{0,1} transpose(s), dimensions={1,0}
  u = f32[3,4]{1,0} subtract(w, t)
  ROOT out = (f32[2,4]{1,0}, f32[3,4]{1,0}) tuple(y, u)
}
"""
"""The weight gradient of ``w``, blocked by the user's own ``with_sharding_constraint``."""


def test_min_bytes_leaves_a_constraints_site_new():
    """Only a weight gradient (FB001, FB005) falls below ``min_bytes``; a site of FB002, priced
    too, stays new."""
    module = Module("step.hlo.txt", read_hlo(CONSTRAINED_GRADIENT))
    (finding,) = check_module(module, Counter(), min_bytes=10**12).findings
    assert (finding.site.placed_by, finding.site.cost is not None) == (Placement.CONSTRAINT, True)
    assert finding.status is Status.NEW


def test_a_module_dumped_twice_is_checked_once(tmp_path):
    first, second = tmp_path / "a.hlo.txt", tmp_path / "b.hlo.txt"
    shutil.copy(DATA / "constrained.hlo.txt", first)
    shutil.copy(first, second)
    once, twice = check([str(first), str(second)]).modules
    assert (twice.module.same_as, twice.findings) == (str(first), [])
    assert once.findings


def test_accepting_all_accepts_the_new_sites_only():
    """Written into a baseline, each new site is accepted; an ignored one, one below
    ``min_bytes`` (linen_remat's FB005 sites), or one nothing blocks, keeps its status, and the
    result names the baseline."""
    names = ("linen_remat.hlo.txt", "three_layers.hlo.txt", "scanned_fixed.hlo.txt")
    result = check([str(DATA / name) for name in names], ignored=frozenset({"FB003"}))
    before = [statuses(item.findings) for item in result.modules]
    accepted = result.accepting_all("b.json")
    assert accepted.baseline == "b.json"
    after = [statuses(item.findings) for item in accepted.modules]
    assert after == [[Status.ACCEPTED if s is Status.NEW else s for s in each] for each in before]
    assert {Status.NEW, Status.IGNORED, Status.BELOW, None} <= {s for each in before for s in each}


def test_a_site_the_baseline_accepts_is_accepted_below_min_bytes_too(tmp_path):
    """The baseline match comes first: an accepted site under ``min_bytes`` uses up its entry,
    so nothing is stale."""
    scanned = str(DATA / "scanned.hlo.txt")
    file = tmp_path / "baseline.json"
    (checked,) = check([scanned], min_bytes=0).modules
    assert len(checked.new) == 3
    baseline.write(str(file), [(checked.module, site) for site in checked.new])
    result = check([scanned], baseline_file=str(file), min_bytes=1)
    assert set(statuses(result.modules[0].findings)) - {None} == {Status.ACCEPTED}
    assert result.stale == []


def test_by_default_a_site_estimated_at_one_byte_fails(monkeypatch, run):
    """The default threshold is 1 byte, in the API and on the command line: a weight gradient
    estimated at exactly 1 byte is new, and 2 bytes' threshold passes it."""
    path = DATA / "three_layers.hlo.txt"
    site = _check.find_sites(read_module(str(path)))[0]
    one_byte = dataclasses.replace(site, cost=Cost(lost_reduce_scatter_bytes=1))
    monkeypatch.setattr(_check, "find_sites", lambda program: [one_byte])
    assert statuses(check_module(read_module(str(path)), Counter()).findings) == [Status.NEW]
    assert statuses(check([str(path)]).modules[0].findings) == [Status.NEW]
    assert statuses(check([str(path)], min_bytes=2).modules[0].findings) == [Status.BELOW]
    assert (run(path)[0], run(path, "--min-bytes", "2")[0]) == (1, 0)
