"""The report printer every command line uses: nesting and numbers a reader can read."""

from snippets.support.tables import print_report


def test_a_nested_report_is_indented_and_its_floats_positional(capsys):
    print_report({"cost": {"us": 1 / 3, "rows": [{"ms": 72200.8123}]}, "tiny": 4e-5, "big": 1e16})
    assert capsys.readouterr().out.splitlines() == [
        "cost:",
        "  us: 0.3333",
        "  rows:",
        "  | ms |",
        "  | --- |",
        "  | 72200.8123 |",
        "tiny: 0.00004",
        "big: 10000000000000000",
    ]


def test_json_is_the_report_itself(capsys):
    print_report({"ranks": 2, "ratio": 1 / 3}, as_json=True)
    assert capsys.readouterr().out == '{\n  "ranks": 2,\n  "ratio": 0.3333333333333333\n}\n'


def test_four_decimals_from_one_up_four_digits_below(capsys):
    print_report({"a": 1.23456, "b": -9.87654, "c": 0.0123456, "d": -0.5})
    assert capsys.readouterr().out.splitlines() == [
        "a: 1.2346",
        "b: -9.8765",
        "c: 0.01235",
        "d: -0.5",
    ]
