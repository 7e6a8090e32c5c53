"""Issue 15, case by case: each input that once ended in a traceback (or wrote where it should
not, or reached for the network) now gives one clean line and exit 2, or a correct result."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memdiag.cli import app
from tests import conftest
from tests.conftest import FIXTURES

DEMO = str(FIXTURES / "demo.jsonl")


def invoke(*argv: str):  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(app, list(argv))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def one_error(result, code: int = 2) -> str:  # type: ignore[no-untyped-def]
    assert result.exit_code == code, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("memdiag: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


# --- transcripts ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[" * 5000 + "]" * 5000, "nested deeper than 200 levels"),
        ('{"role": "user", "content": ' + "[" * 5000 + "]" * 5000 + "}", "nested deeper"),
        ('{"role": "user", "content": "hi", "x": ' + "9" * 5000 + "}", "5000 digits"),
        ('{"role": "user", "content": "hi", "x": 1e400}', "number out of range: 1e400"),
        (
            '{"role": "user", "content": "hi"}\n'
            '{"role": "assistant", "content": "", "tool_calls": [{"function": "lookup"}]}',
            "in.jsonl:2: field 'tool_calls[0].function' must be an object",
        ),
    ],
)
def test_transcripts_beyond_limits(tmp_path: Path, text: str, expected: str) -> None:
    f = tmp_path / "in.jsonl"
    f.write_text(text, encoding="utf-8")
    for command in ("replay", "convert", "diagnose"):
        assert expected in one_error(invoke(command, str(f)))


def test_lone_surrogate_prints_everywhere(tmp_path: Path) -> None:
    f = tmp_path / "in.jsonl"
    f.write_text(
        '{"role": "user", "content": "I\'m allergic to peanuts \\ud800"}\n'
        '{"role": "assistant", "content": "ok", "forgot": "allergic to peanuts"}\n',
        encoding="utf-8",
    )
    out = invoke("convert", str(f))
    assert out.exit_code == 0 and "peanuts \ufffd" in out.stdout
    for fmt in ("json", "table"):
        assert invoke("replay", str(f), "--format", fmt).exit_code == 0
        assert invoke("diagnose", str(f), "--format", fmt).exit_code == 0


def test_special_and_long_paths(tmp_path: Path) -> None:
    assert "not a regular file" in one_error(invoke("replay", "/dev/zero"))
    assert "not a regular file" in one_error(invoke("inspect-store", "--facts-file", "/dev/zero"))
    assert "not a regular file" in one_error(invoke("check", "/dev/zero"))
    line = one_error(invoke("replay", str(tmp_path / ("a" * 300))))
    assert "file name too long" in line and len(line) < 400


def test_skip_invalid_warning_prints_markup_literally(tmp_path: Path) -> None:
    f = tmp_path / "in.jsonl"
    f.write_text(
        '{"role": "[bold", "content": "x"}\n{"role": "user", "content": "hello"}\n'
        '{"role": "assistant", "content": "[link=https://evil.example]click[/link]"}\n',
        encoding="utf-8",
    )
    r = invoke("replay", str(f), "--skip-invalid", "--show", "all")
    assert r.exit_code == 0, r.stderr
    assert "'[bold'" in r.stderr  # the role as written


def test_console_output_has_no_hyperlinks_or_escapes(tmp_path: Path) -> None:
    import io

    from memdiag.render.literal import LiteralConsole

    buf = io.StringIO()
    console = LiteralConsole(file=buf, force_terminal=True, width=100)
    console.print("[link=https://evil.example]click[/link]")
    from rich.text import Text

    console.print(Text("a\x1b]8;;https://evil.example\x1b\\b\x1b[2J\u202ec"))
    out = buf.getvalue()
    assert "\x1b]8" not in out and "evil.example" not in out.split("click")[0]
    assert "\x1b[2J" not in out and "\u202e" not in out


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([*"ab :/._-[]", "smile", ":smile:", "\t", "\x1b", "\u202e", "\xa0"])
    ).map("".join)
)
def test_narration_prints_what_the_console_would(line: str) -> None:
    """`narrate` writes a plain line itself only where Rich would print it as it is: an emoji
    code, a tab, a control or another space go through the console (this fails if they did
    not: Rich turns ":smile:" into an emoji and expands tabs)."""
    import contextlib
    import io

    from memdiag.cli.runtime import narrate, stderr

    plain, rich = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(plain):
        narrate(line)
    with contextlib.redirect_stderr(rich):
        stderr().print(line, markup=False)
    assert plain.getvalue() == rich.getvalue()


def test_a_json_check_with_an_html_report_does_not_import_rich(tmp_path: Path) -> None:
    """Its only narration is "wrote HTML report to ..." (memdiag.cli.runtime.narrate)."""
    import subprocess
    import sys

    spec = tmp_path / "checks.yaml"
    demo = (FIXTURES / "demo.jsonl").as_posix()
    spec.write_text(
        "version: 1\ncases:\n  - name: demo\n    transcript: " + demo + "\n"
        "    strategy: {name: sliding_window, budget: 400}\n"
        "    expect: [{kept: peanut, at_turn: 2}]\n",
        encoding="utf-8",
    )
    code = (
        "import sys; from memdiag.cli import app\n"
        f"sys.argv = ['memdiag', 'check', {str(spec)!r}, '--format', 'json', '--html', "
        f"{str(tmp_path / 'r.html')!r}]\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        "print('rich' in sys.modules, file=sys.__stdout__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stderr.startswith("wrote HTML report to "), out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"


# --- YAML: configs, check specs, rules files ------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("budget: " + "[" * 5000 + "]" * 5000 + "\n", "cfg.yaml:1: nested deeper than 100"),
        ("budget: " + "9" * 5000 + "\n", "cfg.yaml:1: invalid YAML: an integer of 5000 digits"),
        ("audit: {stale_after_days: .nan}\n", "number out of range"),
        ("strategy: 5\n", "cfg.yaml:1: strategy must be a string, got an integer"),
        (
            "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)),
            "more than 1,000,000 values",
        ),
    ],
)
def test_configs_beyond_limits(tmp_path: Path, text: str, expected: str) -> None:
    (tmp_path / "cfg.yaml").write_text(text, encoding="utf-8")
    assert expected in one_error(invoke("replay", DEMO, "--config", str(tmp_path / "cfg.yaml")))


def test_huge_budget_is_a_correct_result() -> None:
    r = invoke("replay", DEMO, "--budget", "9" * 30, "--format", "json")
    assert r.exit_code == 0
    report = json.loads(r.stdout)
    assert report["budget"] == int("9" * 30)
    assert report["strategies"]["sliding_window"]["turns"]


def test_check_spec_nested_too_deep(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("version: 1\ncases: " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    assert "spec.yaml:2: nested deeper" in one_error(invoke("check", str(spec)))


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ("version: 1\nrules:\n  - id: r1\n    field: name\n", "rules.yaml:3: rules[0] needs key"),
        (
            "version: 1\nrules:\n  - id: r1\n    field: name\n    patterns: [5]\n",
            "rules.yaml:5: rules[0].patterns[0] must be a string",
        ),
        ("version: 1\nrules:\n  - null\n", "rules.yaml:3: rules[0] must be a mapping with 'id'"),
    ],
)
def test_rules_files(tmp_path: Path, rules: str, expected: str) -> None:
    (tmp_path / "rules.yaml").write_text(rules, encoding="utf-8")
    r = invoke("replay", DEMO, "--strategy", "scratchpad", "--rules", str(tmp_path / "rules.yaml"))
    assert expected in one_error(r)


# --- facts files and the audit ----------------------------------------------------------------


def test_facts_file_out_of_range(tmp_path: Path) -> None:
    f = tmp_path / "facts.json"
    f.write_text('[{"key": "a", "value": "b", "updated_at": 1e400}]', encoding="utf-8")
    assert "number out of range: 1e400" in one_error(
        invoke("inspect-store", "--facts-file", str(f))
    )
    f.write_text('[{"key": "a", "value": "b", "updated_at": ' + "9" * 400 + "}]", encoding="utf-8")
    assert "is not an ISO-8601 time" in one_error(invoke("inspect-store", "--facts-file", str(f)))


def test_stale_after_days_beyond_the_calendar() -> None:
    records = str(FIXTURES / "facts_records.json")
    far = invoke(
        "inspect-store", "--facts-file", records, "--stale-after-days", "1000000", "-f", "json"
    )
    assert far.exit_code == 0
    kinds = [f["message"] for f in json.loads(far.stdout)["findings"] if f["kind"] == "stale"]
    assert not any("not updated for more than" in m for m in kinds)  # nothing is that old
    near = invoke(
        "inspect-store", "--facts-file", records, "--stale-after-days", "-1000000", "-f", "json"
    )
    assert near.exit_code == 0


# --- output paths -----------------------------------------------------------------------------


def test_output_paths_refused_before_work(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("mine", encoding="utf-8")
    for out in (str(tmp_path), str(afile / "x"), "/dev/null"):
        for argv in (
            ("replay", DEMO, "--html", out),
            ("diagnose", DEMO, "--html", out),
            ("convert", DEMO, "-o", out),
            ("check", str(FIXTURES / "checks.yaml"), "--junit", out),
        ):
            line = one_error(invoke(*argv))
            assert "directory" in line or "regular file" in line, line
    assert afile.read_text(encoding="utf-8") == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_read_only_folder_refused(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    # root ignores folder modes; sysfs refuses new files even to root
    target = ro / "o.jsonl" if not os.access(ro, os.W_OK) else Path("/sys/kernel/memdiag.jsonl")
    try:
        line = one_error(invoke("convert", DEMO, "-o", str(target)))
        assert "permission denied" in line or "cannot create" in line, line
    finally:
        ro.chmod(0o755)


def test_planted_symlink_and_own_tmp_file_untouched(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious", encoding="utf-8")
    (tmp_path / "out.jsonl.tmp").symlink_to(victim)
    own = tmp_path / "report.html.tmp"
    own.write_text("my notes", encoding="utf-8")
    assert invoke("convert", DEMO, "-o", str(tmp_path / "out.jsonl")).exit_code == 0
    assert invoke("replay", DEMO, "--html", str(tmp_path / "report.html")).exit_code == 0
    assert victim.read_text(encoding="utf-8") == "precious"
    assert own.read_text(encoding="utf-8") == "my notes"
    assert (tmp_path / "out.jsonl.tmp").is_symlink()
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8").count("\n") > 5


# --- network ----------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", [("--encoding", "p50k_base"), ("--model", "text-davinci-003")])
def test_unbundled_encodings_refused_offline(
    flag: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # an empty cache
    from memdiag.tokens import get_encoding

    get_encoding.cache_clear()
    conftest.OUTSIDE_ATTEMPTS.clear()
    line = one_error(invoke("replay", DEMO, *flag))
    assert "not bundled" in line and "does not download" in line
    assert conftest.OUTSIDE_ATTEMPTS == []
    assert list(tmp_path.iterdir()) == []


# --- the profile injection is no longer quadratic -----------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    values=st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=40),
    budget=st.integers(0, 400),
)
def test_injected_profile_matches_prefix_by_prefix(values: list[str], budget: int) -> None:
    from memdiag.config import Settings
    from memdiag.stores.facts_file import FactEntry, FactsFile
    from memdiag.stores.open import LongTermStores, render_profile

    entries = tuple(FactEntry(f"k{i}", f"k{i}", v) for i, v in enumerate(values))
    stores = LongTermStores(FactsFile("f.json", "flat", entries), None, None)
    counter = Settings().token_counter()
    kept, tokens = stores.injected_profile(counter, budget)
    ref: list[FactEntry] = []
    for e in entries:  # the old definition: the longest prefix that fits, entry by entry
        if counter.section_cost(render_profile([*ref, e])) > budget:
            break
        ref.append(e)
    assert kept == ref
    assert tokens == counter.section_cost(render_profile(ref))


# Names the OS refuses: one component longer than NAME_MAX (255 bytes on Linux, macOS) and a
# whole path longer than PATH_MAX (4096). `Path.exists()` raises on both instead of answering.
LONG_NAME = "a" * 300
LONG_PATH = "/".join(["b" * 200] * 25)


@pytest.mark.parametrize("name", [LONG_NAME, LONG_PATH], ids=["name", "path"])
def test_every_path_taking_place_refuses_a_name_too_long(tmp_path: Path, name: str) -> None:
    long = str(tmp_path / name)
    checks = tmp_path / "checks.yaml"
    demo = str(FIXTURES / "demo.jsonl")
    cases = {
        "spec transcript": f"transcript: {long}.jsonl\n    expect: [{{kept: x}}]",
        "spec facts file": f"store: {{facts_file: {long}.json}}\n    expect: [{{fact_key: x}}]",
        "spec chroma": f"store: {{chroma: {long}}}\n    expect: [{{max_findings: {{stale: 0}}}}]",
    }
    for what, body in cases.items():
        checks.write_text(f"version: 1\ncases:\n  - name: c\n    {body}\n", encoding="utf-8")
        line = one_error(invoke("check", str(checks)))
        assert line.startswith(f"memdiag: {checks}:4: "), what
        assert "file name too long" in line and len(line) < 400, what
    for args in (
        ["check", f"{long}.yaml"],
        ["replay", f"{long}.jsonl"],
        ["diagnose", demo, "--config", f"{long}.yaml"],
        ["inspect-store", "--facts-file", f"{long}.json"],
        ["inspect-store", "--chroma", long],
        ["replay", demo, "--html", f"{long}.html"],
        ["replay", demo, "--html", f"{long}/report.html"],
        ["check", str(FIXTURES / "checks.yaml"), "--junit", f"{long}.xml"],
        ["convert", demo, "-o", f"{long}.jsonl"],
    ):
        line = one_error(invoke(*args))
        assert "file name too long" in line and len(line) < 400, args
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checks.yaml"]  # nothing written


def test_a_model_dir_too_long_is_not_found_rather_than_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMDIAG_ONNX_MODEL_DIR", str(tmp_path / LONG_NAME))
    r = invoke("diagnose", str(FIXTURES / "demo.jsonl"), "--budget", "400", "--format", "json")
    assert r.exit_code == 0, r.output
    assert "not installed" in json.loads(r.stdout)["diagnoses"][0]["details"]["semantic_search"]
