"""A check that would test the user's checkout rather than the worktree: a package of the
repository installed editable (`pip install -e .`) into the virtualenv whose `python` the
plan's `verify` runs. `validate` and `start` say so, naming the installed path and the fix,
or refuse the plan where it asks (`checks_import_checkout: error`, exit 5).

The virtualenvs are real, and so is `pip install -e`, offline: the project builds its
editable wheel with a backend of its own (`backend-path`), a `.pth` naming the package's
directory as setuptools, hatchling and flit write one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import Kairo, git
from tests.e2e.test_refusals import assert_nothing_created

pytestmark = pytest.mark.slow

BACKEND = """\
import base64, hashlib, os, zipfile

def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    wheel, info = "mypkg-0.1-py3-none-any.whl", "mypkg-0.1.dist-info"
    files = {
        "__editable__.mypkg.pth": os.path.abspath(PACKAGE_ROOT) + "\\n",
        info + "/METADATA": "Metadata-Version: 2.1\\nName: mypkg\\nVersion: 0.1\\n",
        info + "/WHEEL": "Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    }
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w") as out:
        for name, text in files.items():
            data = text.encode()
            out.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{name},sha256={digest.decode()},{len(data)}")
        out.writestr(info + "/RECORD", "\\n".join(record + [info + "/RECORD,,"]) + "\\n")
    return wheel
"""
PYPROJECT = """\
[build-system]
requires = []
build-backend = "editable_backend"
backend-path = ["."]

[project]
name = "mypkg"
version = "0.1"
"""
#: The agent's change, and a check that passes only on it: on the checkout's code it fails.
AGENT = "agent: {kind: shell, run: \"sed -i 's/X = 1/X = 2/' $PKG/__init__.py\"}\n"
CHECK = "python -c 'import mypkg, sys; sys.exit(mypkg.X != 2)'"


def _package(repo: Path, layout: str) -> Path:
    """A package `mypkg` in `repo`, under `src/` or at the top (`flat`), committed."""
    root = repo / "src" if layout == "src" else repo
    (root / "mypkg").mkdir(parents=True)
    (root / "mypkg" / "__init__.py").write_text("X = 1\n")
    (repo / "pyproject.toml").write_text(PYPROJECT)
    package_root = '"src"' if layout == "src" else '"."'
    (repo / "editable_backend.py").write_text(f"PACKAGE_ROOT = {package_root}\n{BACKEND}")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "mypkg")
    return root / "mypkg"


def _virtualenv(where: Path, *, install: Path | None) -> Path:
    """A virtualenv at `where`, `install` installed editable into it; its bin directory."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    if install is not None:
        pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
        pip += ["--no-build-isolation", "--no-index", "--no-deps", "-e", str(install)]
        done = subprocess.run(pip, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        found = subprocess.run(
            [python, "-c", "import mypkg; print(mypkg.__file__)"],
            capture_output=True,
            text=True,
            cwd="/",
            check=True,
        )
        assert found.stdout.startswith(str(install)), found.stdout  # the checkout's
    return where / "bin"


def _plan(kairo: Kairo, verify: str, package: Path, *, strict: str = "") -> Path:
    relative = package.relative_to(kairo.repo)
    return kairo.write_plan(
        "version: 1\nname: p\n"
        + AGENT.replace("$PKG", str(relative))
        + f'verify: "{verify}"\nlimits: {{max_attempts: 1}}\n'
        + (f"checks_import_checkout: {strict}\n" if strict else "")
        + "subtasks:\n  - id: a\n"
    )


def _on_path(kairo: Kairo, bin_dir: Path) -> None:
    kairo.env["PATH"] = f"{bin_dir}:{kairo.env['PATH']}"


def test_validate_warns_of_a_check_that_imports_the_checkout_of_a_src_layout(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    package = _package(repo, "src")
    bin_dir = _virtualenv(tmp_path / "venv", install=repo)
    _on_path(kairo, bin_dir)
    plan = _plan(kairo, CHECK, package)
    done = kairo.run("validate", str(plan))
    assert done.returncode == 0, done.stderr
    installed = tmp_path / "venv" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    warning = done.stdout.replace("\n", " ")
    assert f"verify `{CHECK}` would test your checkout, not the worktree it runs in" in warning
    assert f"{bin_dir / 'python'} imports from {repo / 'src'}" in warning
    assert f"(by {installed / 'site-packages' / '__editable__.mypkg.pth'})" in warning
    assert f"Make it `PYTHONPATH=src {CHECK}`" in warning


def test_the_plan_s_key_makes_it_an_error_with_exit_5_at_validate_and_start(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    package = _package(repo, "src")
    _on_path(kairo, _virtualenv(tmp_path / "venv", install=repo))
    plan = _plan(kairo, CHECK, package, strict="error")
    for command in ("validate", "start"):
        done = kairo.run(command, str(plan), *(["--detach"] if command == "start" else []))
        assert done.returncode == 5, done.stderr
        assert "would test your checkout" in done.stderr
        assert "the plan says `checks_import_checkout: error`" in done.stderr
    assert_nothing_created(kairo, repo)
    off = _plan(kairo, CHECK, package, strict="off")
    done = kairo.run("validate", str(off))
    assert (done.returncode, "would test" in done.stdout) == (0, False), done.stdout


def test_a_check_that_tests_the_checkout_fails_the_agent_s_right_change_and_its_fix_passes(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    """The trap itself, and `start` naming it: the agent's change is right, and the check
    fails it on the checkout's code; the check the warning proposes passes it."""
    package = _package(repo, "src")
    _on_path(kairo, _virtualenv(tmp_path / "venv", install=repo))
    trapped = kairo.run("start", str(_plan(kairo, CHECK, package)), "--wait")
    assert trapped.returncode == 1, trapped.stderr
    assert "warning: " in trapped.stderr and "would test your checkout" in trapped.stderr
    assert "verify_failed" in kairo.run("status").stdout

    fixed = _plan(kairo, f"PYTHONPATH=src {CHECK}", package)
    done = kairo.run("start", str(fixed), "--wait", "--fresh")
    assert done.returncode == 0, done.stderr
    assert "would test your checkout" not in done.stderr


@pytest.mark.parametrize(
    ("layout", "check", "installed"),
    [
        pytest.param("flat", CHECK, True, id="flat-layout-python-c"),
        pytest.param("flat", "python -m mypkg", True, id="flat-layout-python-m"),
        pytest.param("src", CHECK, False, id="no-editable-install"),
        pytest.param("src", f"PYTHONPATH=src {CHECK}", True, id="src-layout-with-pythonpath"),
        pytest.param("src", "make test", True, id="not-python"),
    ],
)
def test_a_check_that_tests_the_worktree_gets_no_warning(
    kairo: Kairo, repo: Path, tmp_path: Path, layout: str, check: str, installed: bool
) -> None:
    package = _package(repo, layout)
    _on_path(kairo, _virtualenv(tmp_path / "venv", install=repo if installed else None))
    done = kairo.run("validate", str(_plan(kairo, check, package)))
    assert done.returncode == 0, done.stderr
    assert "would test" not in done.stdout, done.stdout


def test_a_flat_layout_is_warned_of_where_the_check_s_program_is_a_script(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    """A console script (`pytest`) puts its own directory first, not the worktree: the
    checkout's package at the top is the one imported."""
    package = _package(repo, "flat")
    bin_dir = _virtualenv(tmp_path / "venv", install=repo)
    script = bin_dir / "check-mypkg"
    script.write_text(f"#!{bin_dir / 'python'}\nimport mypkg, sys\nsys.exit(mypkg.X != 2)\n")
    script.chmod(0o755)
    _on_path(kairo, bin_dir)
    done = kairo.run("validate", str(_plan(kairo, "check-mypkg", package)))
    assert done.returncode == 0, done.stderr
    warning = done.stdout.replace("\n", " ")
    assert f"imports from {repo} (by" in warning
    assert "Make it `PYTHONPATH=. check-mypkg`" in warning
