"""The benchmarks and scripts import memdiag names that exist.

They are run by hand (README, Benchmarks), not by the suite, and import much of memdiag inside
their functions; a renamed or moved name broke `bench_evidence.py` unnoticed. Every
``from memdiag... import name`` in them, at any depth, must resolve.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted([*ROOT.glob("benchmarks/*.py"), *ROOT.glob("scripts/*.py")])


def _imports(path: Path) -> list[tuple[int, str, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memdiag"):
            out += [(node.lineno, node.module or "", a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, "") for a in node.names if a.name.startswith("memdiag")]
    return out


def test_there_are_files_to_check() -> None:
    assert any(p.parent.name == "benchmarks" for p in FILES)
    assert sum(len(_imports(p)) for p in FILES) > 20


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_memdiag_imports_resolve(path: Path) -> None:
    missing = []
    for line, module, name in _imports(path):
        mod = importlib.import_module(module)
        if name and name != "*" and not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"line {line}: {module}.{name}")
    assert not missing, f"{path.name}: " + ", ".join(missing)
