#!/usr/bin/env python3
"""Small, real Python codemods for the demo and the end-to-end tests (standard library only).

    codemod.py rename OLD NEW FILE...            rename an identifier (NAME tokens only:
                                                 strings and comments are left alone)
    codemod.py set-constant NAME VALUE FILE      rewrite the value of `NAME = ...`
    codemod.py annotate NAME COMMENT FILE        put `# COMMENT` after `NAME = ...`
    codemod.py add-docstring TEXT FILE...        give a module without one a docstring

Each exits 0 and says what it changed; a file it cannot parse is an error (exit 1).
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path


def rename(old: str, new: str, paths: list[str]) -> None:
    for name in paths:
        path = Path(name)
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines(keepends=True)
        hits = [
            token
            for token in tokenize.generate_tokens(io.StringIO(source).readline)
            if token.type == tokenize.NAME and token.string == old
        ]
        # Right to left, so earlier columns on the same line stay valid.
        for token in reversed(hits):
            row, col = token.start
            line = lines[row - 1]
            lines[row - 1] = line[:col] + new + line[col + len(old) :]
        if hits:
            path.write_text("".join(lines), encoding="utf-8")
            print(f"{path}: renamed {old} -> {new} ({len(hits)}x)")


def _assignment_line(path: Path, name: str) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return node.lineno
    raise SystemExit(f"{path}: no module-level assignment to {name}")


def set_constant(name: str, value: str, file: str) -> None:
    path = Path(file)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    row = _assignment_line(path, name)
    lines[row - 1] = re.sub(r"=\s*[^#\n]*", f"= {value}", lines[row - 1], count=1)
    path.write_text("".join(lines), encoding="utf-8")
    print(f"{path}:{row}: {name} = {value}")


def annotate(name: str, comment: str, file: str) -> None:
    path = Path(file)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    row = _assignment_line(path, name)
    code = lines[row - 1].split("#", 1)[0].rstrip()
    lines[row - 1] = f"{code}  # {comment}\n"
    path.write_text("".join(lines), encoding="utf-8")
    print(f"{path}:{row}: annotated {name}")


def add_docstring(text: str, paths: list[str]) -> None:
    for name in paths:
        path = Path(name)
        source = path.read_text(encoding="utf-8")
        if ast.get_docstring(ast.parse(source)) is None:
            path.write_text(f'"""{text}"""\n\n{source}', encoding="utf-8")
            print(f"{path}: added a docstring")


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    command, args = argv[0], argv[1:]
    try:
        if command == "rename" and len(args) >= 3:
            rename(args[0], args[1], args[2:])
        elif command == "set-constant" and len(args) == 3:
            set_constant(*args)
        elif command == "annotate" and len(args) == 3:
            annotate(*args)
        elif command == "add-docstring" and len(args) >= 2:
            add_docstring(args[0], args[1:])
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (OSError, SyntaxError, tokenize.TokenError) as error:
        print(f"codemod {command}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
