"""Each site's role by where its value goes, on hand-written HLO: every way a value is followed,
and the names a module gives."""

import dataclasses

from hlo_texts import ROLES

from conftest import DATA
from find_barriers._cost import Cost
from find_barriers._flow import Flow
from find_barriers._program import read_hlo
from find_barriers._rules import rule_of
from find_barriers._sites import find_sites
from find_barriers._vocabulary import Placement, Role


def roles() -> dict[str, tuple]:
    return {
        site.transpose: (site.role, site.output, site.parameter, rule_of(site).code)
        for site in find_sites(read_hlo(ROLES))
    }


def test_a_value_reaching_a_donated_parameters_update_is_its_weight_gradient():
    assert roles()["t1"] == ("weight gradient", 0, "params['w']", "FB001")


def test_a_value_that_ends_in_a_reduction_is_an_activation_gradient():
    assert roles()["t2"] == ("activation gradient", None, None, "FB003")


def test_a_value_a_scatter_writes_into_a_table_is_an_activation_gradient():
    """As a lookup's gradient writes an activation's gradient into the table's."""
    assert roles()["t7"] == ("activation gradient", None, None, "FB003")


def test_a_value_an_unknown_custom_call_takes_is_of_unknown_role_and_checked_as_a_weight():
    assert roles()["t3"] == ("unknown", None, None, "FB001")


def test_the_forward_recomputed_under_remat_is_forward():
    assert roles()["t4"] == ("forward", None, None, "FB003")


def test_a_shared_computation_gives_each_call_back_only_its_own_value():
    program = read_hlo(ROLES)
    assert Flow(program).reach("t5").outputs == {1}  # through the false branch, not to c6's 2
    assert roles()["t5"][:2] == ("weight gradient", 1)
    assert Flow(program).reach("w").outputs == {0, 2}


def test_without_the_alias_the_update_names_no_parameter():
    unaliased = ROLES.replace(", input_output_alias={ {0}: (0, {}, may-alias) }", "")
    site = next(s for s in find_sites(read_hlo(unaliased)) if s.transpose == "t1")
    assert (site.role, site.output, site.parameter, site.what) == (
        "weight gradient",
        0,
        None,
        "weight gradient (output 0)",
    )


def test_a_weight_gradient_the_estimate_prices_at_nothing_is_fb005_and_only_that():
    """FB005 takes a blocked weight gradient whose estimate is known and 0 bytes (the scan's,
    stacked in its loop); the same site of unknown role or unknown cost stays FB001, as does one
    of any cost; a constraint's stays FB002."""
    free = find_sites(read_hlo((DATA / "scanned.hlo.txt").read_text()))[0]
    assert (free.blocked, free.role, free.cost.bytes) == (True, Role.WEIGHT_GRADIENT, 0)
    assert rule_of(free).code == "FB005"
    unknown = dataclasses.replace(free, role=Role.UNKNOWN)
    assert (unknown.cost.bytes, rule_of(unknown).code) == (0, "FB001")
    assert rule_of(dataclasses.replace(free, cost=None)).code == "FB001"
    wire = dataclasses.replace(free, cost=Cost(lost_reduce_scatter_bytes=1, basis=("4.7", "4.2")))
    assert rule_of(wire).code == "FB001"  # stacked, but a lost reduce-scatter still costs
    constrained = dataclasses.replace(free, placed_by=Placement.CONSTRAINT)
    assert rule_of(constrained).code == "FB002"
    assert roles()["t1"][3] == "FB001"  # priced: 512 bytes
