"""``find-barriers`` and ``python -m find_barriers``: the Python is checked before anything else
is imported, so that an old one gets one ``error:`` line and exit status 2, not a traceback."""

import sys

FLOOR = (3, 10)


def main(argv=None):  # no annotations: this module must be read by any Python 3
    """Check the Python, then run the command line (:func:`find_barriers.main`)."""
    if sys.version_info < FLOOR:
        found = ".".join(map(str, sys.version_info[:3]))
        sys.stderr.write(
            f"error: find-barriers needs Python {'.'.join(map(str, FLOOR))} or newer, and this "
            f"is Python {found} ({sys.executable}); install it under a newer Python\n"
        )
        raise SystemExit(2)
    from find_barriers._cli import main as run  # noqa: PLC0415 - only once the Python is known

    run(argv)


if __name__ == "__main__":
    main()
