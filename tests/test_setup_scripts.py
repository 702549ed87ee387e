"""The README's set-up scripts run where a Mac (or any non-Debian machine) runs them.

macOS has no ``sha256sum`` (it has ``shasum``), no ``apt-get``, often no ``fc-list``, and its
``/bin/bash`` is 3.2: the scripts must complete without the first three and use no Bash-4 syntax.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "scripts").glob("*.sh")) + [ROOT / ".ci" / "run"]
# Syntax Bash 3.2 does not have: associative arrays, case-changing expansions, mapfile/readarray,
# the &>> and |& redirections, ;& / ;;& case fall-through, coproc, negative array indexes.
BASH4_ONLY = {
    "associative array": re.compile(r"\b(declare|local|typeset)\s+-[a-zA-Z]*A"),
    "case-changing expansion": re.compile(r"\$\{[^}]*(,,|\^\^|,|\^)\}"),
    "mapfile/readarray": re.compile(r"\b(mapfile|readarray)\b"),
    "&>> redirection": re.compile(r"&>>"),
    "|& pipe": re.compile(r"\|&"),
    "case fall-through": re.compile(r";;?&"),
    "coproc": re.compile(r"\bcoproc\b"),
    "negative array index": re.compile(r"\$\{\w+\[-\d+\]\}"),
}
# What the scripts may use from the PATH on a bare Mac (sha256sum, apt-get and fc-list left out).
TOOLS = ("bash", "dirname", "uname", "id", "head", "cat", "env")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_bash4_only_syntax(script):
    text = "\n".join(line.split("#", 1)[0] if not line.lstrip().startswith("#!") else "" for line in
                     script.read_text().splitlines())
    found = [name for name, pattern in BASH4_ONLY.items() if pattern.search(text)]
    assert found == [], f"{script.name}: {found}"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_scripts_parse(script):
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0


def test_setup_completes_without_sha256sum_apt_or_fc_list(tmp_path):
    """With the venv in place and nothing changed, set-up must find it satisfied using only portable tools."""
    if not (ROOT / ".venv" / "bin" / "python").is_file():
        pytest.skip("needs the project's .venv (made by scripts/setup.sh)")
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (bare / tool).symlink_to(found)
    (bare / "python3").symlink_to(sys.executable)
    for missing in ("sha256sum", "apt-get", "fc-list"):
        assert not (bare / missing).exists()
    env = {"PATH": str(bare), "HOME": os.environ.get("HOME", str(tmp_path)), "DAOTAI_SKIP_CHROMIUM": "1"}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh")], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "command not found" not in done.stderr
    assert "apt-get" not in done.stderr or Path("/etc/debian_version").is_file()  # no apt hint off Debian


def test_setup_says_which_python_it_needs(tmp_path):
    """No Python 3.11+ on the PATH and no .venv yet: one clear line, exit 1, nothing created."""
    copy = tmp_path / "proj"
    (copy / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", copy / "scripts" / "setup.sh")
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in TOOLS:
        (bare / tool).symlink_to(shutil.which(tool))
    old = bare / "python3"
    old.write_text("#!/bin/sh\nexit 1\n")  # a python3 that is not 3.11+ (the version check fails)
    old.chmod(0o755)
    done = subprocess.run(["bash", str(copy / "scripts" / "setup.sh")], capture_output=True, text=True,
                          env={"PATH": str(bare), "HOME": str(tmp_path)}, timeout=60)
    assert done.returncode == 1
    assert "needs Python 3.11 or newer" in done.stderr
    assert not (copy / ".venv").exists()


# ------------------------------------------------------------------ system packages: said, then installed


def project_copy(tmp_path: Path) -> Path:
    """The set-up script in a folder of its own whose .venv is already satisfied (python here, the stamp
    of this pyproject.toml and every extra), so only the system-package part of set-up has work to do."""
    project = tmp_path / "proj"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", project / "scripts" / "setup.sh")
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")
    (project / ".venv" / "bin").mkdir(parents=True)
    (project / ".venv" / "bin" / "python").symlink_to(sys.executable)
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    (project / ".venv" / ".daotai-setup").write_text(f"{digest} dev,server,neural,cluster,mlx,usd\n")
    return project


def bare_debian_root(tmp_path: Path) -> tuple[Path, Path]:
    """A PATH with the portable tools, an ``id`` that says root and an ``apt-get`` that only logs its calls
    (to stderr, so their order against set-up's own lines shows, and to a file); no fc-list, pdftoppm, Xvfb."""
    if not Path("/etc/debian_version").is_file() or sys.platform != "linux":
        pytest.skip("set-up installs system packages only on Debian/Ubuntu")
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in TOOLS:
        if tool != "id":
            (bare / tool).symlink_to(shutil.which(tool))
    log = tmp_path / "apt-get.log"
    fakes = {"id": "#!/bin/sh\necho 0\n",
             "apt-get": f'#!/bin/sh\necho "apt-get $*" >> "{log}"\necho "APT-GET-RAN $*" >&2\n'}
    for name, text in fakes.items():
        (bare / name).write_text(text)
        (bare / name).chmod(0o755)
    return bare, log


def test_setup_says_what_it_installs_and_why_before_installing_it(tmp_path):
    project = project_copy(tmp_path)
    bare, log = bare_debian_root(tmp_path)
    env = {"PATH": str(bare), "HOME": str(tmp_path), "DAOTAI_SKIP_CHROMIUM": "1"}
    done = subprocess.run(["bash", str(project / "scripts" / "setup.sh")], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    said = done.stderr
    first_install = said.index("APT-GET-RAN install")
    announced = said.index("setup: installing system packages with apt-get (DAOTAI_NO_SYSTEM_PACKAGES=1 skips this)")
    assert announced < said.index("APT-GET-RAN update") < first_install
    listing = said[announced:first_install]
    installed = log.read_text().splitlines()
    for package, why in (("fonts-wqy-microhei", "CJK font"), ("poppler-utils", "storyboard PDF"),
                         ("xvfb", "GLX context")):
        assert package in listing and why in listing, (package, said)
        assert any(line.startswith("apt-get install") and package in line.split() for line in installed), installed
    assert not any("chromium" in line for line in installed)  # DAOTAI_SKIP_CHROMIUM=1 still leaves it out


def test_no_system_packages_installs_none_and_prints_the_command(tmp_path):
    project = project_copy(tmp_path)
    bare, log = bare_debian_root(tmp_path)
    env = {"PATH": str(bare), "HOME": str(tmp_path), "DAOTAI_NO_SYSTEM_PACKAGES": "1"}
    done = subprocess.run(["bash", str(project / "scripts" / "setup.sh")], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert not log.exists() and "APT-GET-RAN" not in done.stderr
    assert "not installing system packages (DAOTAI_NO_SYSTEM_PACKAGES=1)" in done.stderr
    assert "poppler-utils: poppler's pdftoppm" in done.stderr and "without it the GLX previz test is skipped" in done.stderr
    command = [line for line in done.stderr.splitlines() if "to install them yourself" in line]
    assert command and command[0].split("yourself: ")[1].startswith("sudo apt-get install ")
    assert "xvfb" in command[0] and "fonts-wqy-microhei" in command[0]


@pytest.mark.parametrize("name", ["setup.sh", "test.sh"])
def test_the_scripts_and_the_readme_document_the_switch(name):
    header = "\n".join(line for line in (ROOT / "scripts" / name).read_text().splitlines()[:16]
                       if line.startswith("#"))
    assert "DAOTAI_NO_SYSTEM_PACKAGES=1" in header
    for package in ("Chromium", "poppler", "Xvfb", "Mesa", "CJK font"):
        assert package in header, (name, package)
    top = (ROOT / "README.md").read_text().split("## The script")[0]
    assert "DAOTAI_NO_SYSTEM_PACKAGES=1" in top
