"""The layout rules, checked on the source: imports only go downward (no cycles,
function-level imports included), modules stay small, and only cli/ and render/ import the
terminal libraries (Typer, Rich)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "memdiag"
MAX_LINES = 550
UI_LIBRARIES = ("typer", "rich", "click")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path) -> set[str]:
    """Every module named by an import anywhere in the file (top level or inside functions).

    ``from pkg import mod`` names ``pkg.mod`` when that is a module; relative imports are
    resolved against ``name``.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return out


def _graph() -> dict[str, set[str]]:
    """memdiag module → the memdiag modules it imports (a package's __init__ counts as a module)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = {m for m in _imports(name, path) if m in modules and m != name}
        # importing a.b.c runs a/__init__ and a/b/__init__ first
        for m in list(found):
            parts = m.split(".")
            found.update(
                ".".join(parts[:k])
                for k in range(2, len(parts))
                if ".".join(parts[:k]) in modules and not name.startswith(".".join(parts[:k]))
            )
        graph[name] = found
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_function_level_imports():
    graph = _graph()
    # cli.py imports the diagnosis package only inside its command functions
    assert "memdiag.diagnosis" in graph["memdiag.cli"]
    assert "memdiag.stores.open" in graph["memdiag.checks.run"]


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    cycles = _cycles(_graph())
    assert cycles == [], "import cycles: " + "; ".join(" ↔ ".join(c) for c in cycles)


def test_modules_stay_small():
    sizes = {
        name: len(path.read_text(encoding="utf-8").splitlines())
        for name, path in _modules().items()
    }
    too_big = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert too_big == {}, f"modules over {MAX_LINES} lines: {too_big}"


def test_only_cli_and_render_import_terminal_libraries():
    offenders = {}
    for name, path in _modules().items():
        if name.split(".")[1:2] in (["cli"], ["render"]):
            continue
        used = {m.split(".")[0] for m in _imports(name, path) if m.split(".")[0] in UI_LIBRARIES}
        if used:
            offenders[name] = sorted(used)
    assert offenders == {}, f"Typer/Rich outside cli.py and render/: {offenders}"
