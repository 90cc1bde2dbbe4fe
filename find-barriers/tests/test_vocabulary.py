"""One vocabulary: the JSON schema's enums, the rules and ``action.yml``'s formats are the ones
the code defines, and each word is its value wherever it is written."""

import importlib.resources
import json
import re
from pathlib import Path

import pytest

from find_barriers import RULES, Placement, Role, Status, Verdict
from find_barriers._formats import FORMATS
from find_barriers._rules import STALE_ENTRY

SCHEMA = json.loads(
    importlib.resources.files("find_barriers").joinpath("find_barriers.schema.json").read_text()
)
SITE = SCHEMA["properties"]["modules"]["items"]["properties"]["sites"]["items"]["properties"]
ACTION = Path(__file__).resolve().parent.parent / "action.yml"


@pytest.mark.parametrize(
    ("field", "words"),
    [
        ("verdict", [*Verdict]),
        ("role", [*Role]),
        ("placed_by", [*Placement, None]),
        ("status", [*Status, None]),
        ("rule", [*(code for code in RULES if code != STALE_ENTRY.code), None]),
    ],
)
def test_the_schema_enumerates_each_word_the_code_defines(field, words):
    assert sorted(map(str, SITE[field]["enum"])) == sorted(map(str, words))


def test_the_schema_counts_each_verdict():
    counts = SCHEMA["properties"]["modules"]["items"]["properties"]["counts"]
    assert set(counts["required"]) == {str(verdict) for verdict in Verdict}
    assert {str(verdict) for verdict in Verdict} <= set(SCHEMA["properties"]["total"]["required"])


def test_rules_are_keyed_by_their_own_codes_in_order():
    assert list(RULES) == [rule.code for rule in RULES.values()]
    assert list(RULES) == sorted(RULES)


def test_the_action_offers_exactly_the_formats_the_command_line_has():
    action = ACTION.read_text()
    described = re.search(r"^  format:\n    description: (.*)$", action, re.MULTILINE)
    assert described, "action.yml has no format input"
    offered = set(re.findall(r"\b(" + "|".join(FORMATS) + r")\b", described[1]))
    assert offered == set(FORMATS)


@pytest.mark.parametrize("word", [*Verdict, *Role, *Placement, *Status])
def test_a_word_prints_compares_and_serialises_as_its_value(word):
    assert (str(word), f"{word}", f"{word:>20}".strip()) == (word.value,) * 3
    assert word == word.value
    assert json.dumps(word) == json.dumps(word.value)
    assert json.loads(json.dumps({word: 1})) == {word.value: 1}
