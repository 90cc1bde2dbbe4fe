"""Fixtures the tests share. The run's machinery (devices, ``--changed-since``, the site build)
is in ``tests/plugins/``, which the root ``conftest.py`` registers."""

import pytest


@pytest.fixture
def one_error_line(capsys):
    """``run(main, argv)``: expect exit status 2, nothing on stdout and a single ``error:`` line on
    stderr, and return that line."""

    def run(main, argv: list[str]) -> str:
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        captured = capsys.readouterr()
        lines = captured.err.splitlines()
        assert len(lines) == 1, captured.err
        assert lines[0].startswith("error: "), captured.err
        assert captured.out == ""
        return lines[0]

    return run
