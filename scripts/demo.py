#!/usr/bin/env python3
"""`make demo`: a sample repository, a six-subtask refactor plan, run for real in tmux.

The agents are real code rewrites (ruff's autofix rules, `scripts/codemod.py`), one pair
is set to edit the same line (a deliberate conflict) and one subtask depends on another.
Everything happens in a temporary directory and on a tmux server of its own.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAUSE = os.environ.get("KAIRO_DEMO_PAUSE", "2")  # seconds each agent lingers, to be watched

FILES = {
    ".gitignore": "__pycache__/\n",
    "shop/__init__.py": "",
    "shop/config.py": 'TAX_RATE = 0.2\n\n\nCURRENCY = "EUR"\n',
    "shop/util.py": '"""Helpers."""\n\n\ndef fmt_money(amount):\n    return f"{amount:.2f}"\n',
    "shop/pricing.py": textwrap.dedent(
        """\
        from shop.util import fmt_money
        from shop.config import TAX_RATE


        def gross(net):
            return net * (1 + TAX_RATE)


        def price_tag(net):
            return fmt_money(gross(net))
        """
    ),
}
for item in ("books", "games", "music", "toys"):
    FILES[f"shop/catalog/{item}.py"] = textwrap.dedent(
        f"""\
        def describe(title, price):
            return "%s ({item}): %.2f" % (title, price)
        """
    )
FILES["shop/catalog/__init__.py"] = ""


def plan_text() -> str:
    ruff = shlex.quote(str(Path(sys.executable).parent / "ruff"))
    codemod = f"{shlex.quote(sys.executable)} {shlex.quote(str(HERE / 'codemod.py'))}"
    show = f'echo "== $KAIRO_SUBTASK_ID, attempt $KAIRO_ATTEMPT"; sleep {PAUSE}'

    def agent(command: str) -> str:
        # A block scalar: the shell line needs no YAML quoting at all.
        return f"agent:\n      run: |\n        {show}\n        {command}"

    receipt = (
        "grep -q 'def format_money' shop/util.py && cat > shop/receipt.py <<'PY'\n"
        "        from shop.util import format_money\n\n\n"
        "        def line(item, amount):\n"
        '            return f"{item}: {format_money(amount)}"\n'
        "        PY"
    )
    fstrings = agent(
        f"{ruff} check --no-cache --select UP031,UP032 --fix --unsafe-fixes $KAIRO_FILES"
    )
    rename = agent(f"{codemod} rename fmt_money format_money shop/util.py shop/pricing.py")
    tax_rate = agent(f"{codemod} set-constant TAX_RATE 0.21 shop/config.py")
    tax_note = agent(f'{codemod} annotate TAX_RATE "set by finance" shop/config.py')
    receipts = agent(receipt)
    return f"""\
version: 1
name: shop-cleanup
max_parallel: 3
verify: {shlex.quote(sys.executable)} -m compileall -q shop
integration_verify: {shlex.quote(sys.executable)} -m compileall -q shop
agent:
  kind: shell
  run: "true"
subtasks:
  - id: fstrings
    title: Convert %-formatting to f-strings
    prompt: "Convert %-formatting to f-strings in {{files}}"
    split: {{files: "shop/catalog/[a-z]*.py", max_files: 2, by: count}}
    {fstrings}
  - id: rename-helper
    title: Rename fmt_money to format_money
    {rename}
  - id: tax-rate
    title: Raise the tax rate to 21%
    {tax_rate}
  - id: tax-note
    title: Say where the tax rate comes from (edits the same line as tax-rate)
    {tax_note}
  - id: receipt
    title: Add receipts, using the renamed helper
    depends_on: [rename-helper]
    {receipts}
"""


def run(*argv: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, check=check, text=True, capture_output=True)


def make_repository(root: Path) -> None:
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    run("git", "init", "-q", "-b", "main", cwd=root)
    run("git", "add", ".", cwd=root)
    run(
        "git",
        "-c",
        "user.name=Demo",
        "-c",
        "user.email=demo@example.com",
        "commit",
        "-q",
        "-m",
        "A small shop",
        cwd=root,
    )


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="kairo-demo-"))
    # A tmux server of this demo's own: an earlier demo's sessions are not in the way.
    socket = workdir.name  # kairo-demo-XXXXXXXX, as its directory
    repo = workdir / "shop"
    repo.mkdir()
    make_repository(repo)
    plan = workdir / "plan.yaml"
    plan.write_text(plan_text(), encoding="utf-8")
    kairo = [sys.executable, "-m", "orchestrator.cli.main"]
    env = {**os.environ, "KAIRO_TMUX_SOCKET": socket}
    print(f"sample repository: {repo}\nplan: {plan}\n")
    subprocess.run([*kairo, "validate", str(plan)], cwd=repo, env=env, check=True)
    print(f"\nrunning it; watch the agents with:  tmux -L {socket} attach\n", flush=True)
    outcome = subprocess.run([*kairo, "start", str(plan), "--wait", "--detach"], cwd=repo, env=env)
    print()
    subprocess.run([*kairo, "report"], cwd=repo, env=env, check=False)
    subprocess.run([*kairo, "status"], cwd=repo, env=env, check=False)
    verdict = {
        0: "every subtask merged",
        1: "five subtasks merged and tax-note conflicted, as planned (so start --wait exited 1)",
    }
    print(
        f"\nThe execution ended: {verdict.get(outcome.returncode, f'exit {outcome.returncode}')}.\n"
        "Look around:\n"
        f"  cd {repo}\n"
        f"  KAIRO_TMUX_SOCKET={socket} kairo-orch attach     # the panes (C-b d detaches)\n"
        "  git log --oneline --graph --all\n"
        f"  KAIRO_TMUX_SOCKET={socket} kairo-orch clean      # keeps the conflicted work\n"
        f"  tmux -L {socket} kill-server; rm -rf {workdir}   # when done\n"
        "(kairo-orch is .venv/bin/kairo-orch in the kairo-orch checkout.)"
    )
    return 0 if outcome.returncode in (0, 1) else outcome.returncode


if __name__ == "__main__":
    sys.exit(main())
