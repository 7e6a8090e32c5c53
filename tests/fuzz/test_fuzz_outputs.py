"""Fuzz the output paths (``--html``, ``--junit``, ``convert -o``): a folder, ``FILE/x``, a
device, a FIFO, a symlink, a read-only folder, a name too long, markup in the name, a folder
still to create. Whatever the path, the run ends with exit 0, 1 or 2, writes only the file asked
for and only on success, and never touches anything else (a planted ``OUT.tmp`` symlink
included)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import FIXTURES, fuzz_settings, run_cli

KINDS = [
    "new",
    "existing",
    "folder",
    "file_child",
    "device",
    "fifo",
    "symlink_to_file",
    "symlink_to_folder",
    "dangling_symlink",
    "read_only_folder",
    "too_long",
    "nested_new",
    "planted_tmp_symlink",
]
COMMANDS = [
    ["replay", "demo.jsonl", "--html", "OUT"],
    ["diagnose", "demo.jsonl", "--html", "OUT"],
    ["convert", "demo.jsonl", "-o", "OUT"],
    ["check", "checks.yaml", "--junit", "OUT"],
]


def _prepare(folder: Path, kind: str, name: str) -> tuple[str, list[str]]:
    """Make the situation ``kind``; return (path to pass, outputs allowed on success)."""
    (folder / "victim").write_text("precious", encoding="utf-8")
    if kind == "new":
        return name, [name]
    if kind == "existing":
        (folder / name).write_text("old", encoding="utf-8")
        return name, [name]
    if kind == "folder":
        (folder / name).mkdir()
        return name, []
    if kind == "file_child":
        return "victim/" + name, []
    if kind == "device":
        return "/dev/null", []
    if kind == "fifo":
        os.mkfifo(folder / name)
        return name, []
    if kind == "symlink_to_file":
        (folder / name).symlink_to(folder / "victim")
        return name, [name]  # the link is replaced by the report; the victim stays
    if kind == "symlink_to_folder":
        (folder / "sub").mkdir()
        (folder / name).symlink_to(folder / "sub")
        return name, []
    if kind == "dangling_symlink":
        (folder / name).symlink_to(folder / "nowhere")
        return name, [name]
    if kind == "read_only_folder":
        ro = folder / "ro"
        ro.mkdir()
        ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
        return f"ro/{name}", [f"ro/{name}"]  # root may still write there
    if kind == "too_long":
        return "x" * 300, []
    if kind == "nested_new":
        return f"a/b/{name}", [f"a/b/{name}"]
    (folder / f"{name}.tmp").symlink_to(folder / "victim")  # planted_tmp_symlink
    return name, [name]


@fuzz_settings(13, 500)
@given(
    kind=st.sampled_from(KINDS),
    command=st.sampled_from(COMMANDS),
    name=st.sampled_from(["out.html", "[bold].xml", "report.jsonl", "a b.html", "-o"]),
)
def test_fuzz_output_paths(kind: str, command: list[str], name: str) -> None:
    folder = Path(tempfile.mkdtemp(prefix="memdiag-fuzz-out-"))
    try:
        for f in ("demo.jsonl", "checks.yaml", "demo_zh.jsonl", "allergy.jsonl", "facts.json"):
            shutil.copy(FIXTURES / f, folder / f)
        shutil.copy(FIXTURES / "facts_records.json", folder / "facts_records.json")
        path, allowed = _prepare(folder, kind, name)
        argv = [path if a == "OUT" else a for a in command]
        outcome = run_cli("output_path", argv, folder, outputs=allowed)
        assert (folder / "victim").read_text(encoding="utf-8") == "precious"
        if not allowed:
            assert outcome.code == 2, (kind, outcome.stderr)
    finally:
        for p in folder.rglob("*"):
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
        shutil.rmtree(folder, ignore_errors=True)
