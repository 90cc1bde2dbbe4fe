"""The CI scripts in ``.ci/``: root only through ``as_root``, and the browser found in order.

``.ci/find-browser`` runs with a ``PATH`` of stand-ins for ``id``, ``sudo``, ``apt-get`` and
``uv`` that record their calls, and a temporary ``/etc/os-release`` and ``/usr/bin/chromium``,
so each case is a machine: root on Debian, a user with sudo on Debian or on Ubuntu, a machine
without apt-get, a user without sudo.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIND_BROWSER = ROOT / ".ci" / "find-browser"
CI_SCRIPTS = [ROOT / ".ci" / "run", FIND_BROWSER]
PLAYWRIGHT_CHROMIUM = "/home/runner/.cache/ms-playwright/chromium-1234/chrome-linux/chrome"

STAND_INS = {
    # `id -u` says the uid the case gives.
    "id": 'echo "$FAKE_UID"',
    # sudo runs the command as root (AS_ROOT=1), as passwordless sudo does.
    "sudo": '[ "$1" = --non-interactive ] && shift; AS_ROOT=1 exec "$@"',
    # apt-get refuses to run unless root, as the real one does; its install makes the browser.
    "apt-get": (
        '[ "$FAKE_UID" = 0 ] || [ "${AS_ROOT:-}" = 1 ] || { echo "apt-get: not root" >&2; exit 100; }\n'
        'case " $* " in *" install "*) printf "#!/bin/sh\\n" > "$DEBIAN_CHROMIUM"; '
        'chmod +x "$DEBIAN_CHROMIUM";; esac'
    ),
    # uv run ... python prints where Playwright's browser is.
    "uv": f'case " $* " in *" python "*) echo {PLAYWRIGHT_CHROMIUM};; esac',
}
REAL_TOOLS = ("dirname", "env", "chmod")


def make_machine(tmp_path: Path, *, distribution: str, commands: tuple[str, ...]) -> Path:
    """A ``bin`` folder holding the real tools the scripts need and the named stand-ins, each
    but ``id`` logging its arguments (after ``root`` or ``user``) to ``calls.log``; and an
    os-release."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in REAL_TOOLS:
        (bin_dir / tool).symlink_to(shutil.which(tool))
    for name in commands:
        stand_in = bin_dir / name
        log = f'echo "$([ "$FAKE_UID" = 0 ] || [ "${{AS_ROOT:-}}" = 1 ] && echo root || echo user) {name} $*" >> "$CALLS"'
        body = STAND_INS[name] if name == "id" else f"{log}\n{STAND_INS[name]}"
        stand_in.write_text(f"#!{shutil.which('bash')}\n{body}\n")
        stand_in.chmod(0o755)
    (tmp_path / "os-release").write_text(f'PRETTY_NAME="{distribution}"\nID={distribution}\n')
    return bin_dir


def find_browser(
    tmp_path: Path,
    *,
    uid: int,
    distribution: str,
    commands: tuple[str, ...] = ("id", "sudo", "apt-get", "uv"),
    chromium_installed: bool = False,
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run ``.ci/find-browser`` on the machine the arguments describe: its result and calls."""
    bin_dir = make_machine(tmp_path, distribution=distribution, commands=commands)
    chromium = tmp_path / "usr-bin-chromium"
    if chromium_installed:
        chromium.write_text("#!/bin/sh\n")
        chromium.chmod(0o755)
    calls = tmp_path / "calls.log"
    calls.touch()
    environment = {
        "PATH": str(bin_dir),
        "FAKE_UID": str(uid),
        "CALLS": str(calls),
        "DEBIAN_CHROMIUM": str(chromium),
        "OS_RELEASE": str(tmp_path / "os-release"),
    }
    result = subprocess.run(
        [shutil.which("bash"), str(FIND_BROWSER)],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    return result, calls.read_text().splitlines()


APT_GET = [
    "apt-get update -qq",
    "apt-get install -y -qq chromium",
]


def test_root_on_debian_installs_debian_chromium_without_sudo(tmp_path):
    result, calls = find_browser(tmp_path, uid=0, distribution="debian")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{tmp_path / 'usr-bin-chromium'}\n"
    assert calls == [f"root {call}" for call in APT_GET]


def test_a_user_with_sudo_on_debian_installs_it_through_sudo(tmp_path):
    result, calls = find_browser(tmp_path, uid=1001, distribution="debian")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{tmp_path / 'usr-bin-chromium'}\n"
    assert calls == [
        f"user sudo --non-interactive {APT_GET[0]}",
        f"root {APT_GET[0]}",
        f"user sudo --non-interactive env DEBIAN_FRONTEND=noninteractive {APT_GET[1]}",
        f"root {APT_GET[1]}",
    ]


def test_an_installed_debian_chromium_comes_first(tmp_path):
    result, calls = find_browser(tmp_path, uid=1001, distribution="ubuntu", chromium_installed=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{tmp_path / 'usr-bin-chromium'}\n"
    assert calls == []


def test_ubuntu_gets_playwrights_chromium_not_its_snap_stub(tmp_path):
    result, calls = find_browser(tmp_path, uid=1001, distribution="ubuntu")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{PLAYWRIGHT_CHROMIUM}\n"
    run = "user uv run --locked --isolated --no-default-groups --only-group browser"
    assert calls[0] == f"{run} playwright install --with-deps chromium"
    assert calls[1].startswith(f"{run} python -c ")
    assert len(calls) == 2


def test_without_apt_get_it_is_playwrights_chromium(tmp_path):
    result, calls = find_browser(tmp_path, uid=0, distribution="debian", commands=("id", "uv"))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{PLAYWRIGHT_CHROMIUM}\n"
    assert [call.split()[1] for call in calls] == ["uv", "uv"]


def test_a_user_without_sudo_gets_one_error_line(tmp_path):
    result, calls = find_browser(
        tmp_path, uid=1001, distribution="debian", commands=("id", "apt-get", "uv")
    )
    assert result.returncode == 2
    assert result.stderr == (
        "error: 'apt-get update -qq' needs root: run this as root or with passwordless sudo\n"
    )
    assert calls == []


@pytest.mark.parametrize("script", CI_SCRIPTS, ids=lambda path: path.name)
def test_every_apt_get_runs_as_root(script):
    """No bare ``apt-get``: each command line that runs it goes through ``as_root``."""
    lines = [
        line.split("#")[0].replace("command -v apt-get", "")
        for line in script.read_text().splitlines()
    ]
    bare = [line for line in lines if re.search(r"\bapt-get\b", line) and "as_root " not in line]
    assert bare == []


def test_ci_run_names_a_wrong_option_in_one_error_line():
    bash = shutil.which("bash")
    result = subprocess.run(
        [bash, str(ROOT / ".ci" / "run"), "--set-up"], capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "error: unknown option '--set-up' (the one option is --setup)\n"
