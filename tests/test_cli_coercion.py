"""memdiag's option coercion without pydantic (memdiag/cli/coercion.py) against typer's own.

Every parameter of every command is coerced both ways on generated values: the results must be
equal (value and type), or both must fail with the same message.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer.main
from hypothesis import given, settings
from hypothesis import strategies as st

from memdiag.cli import app
from memdiag.cli.coercion import fast_runtime_param
from tests.conftest import FIXTURES

_coercion = pytest.importorskip("typer._coercion", reason="this typer has no coercion layer")
Exc = typer.main._click.exceptions.BadParameter  # type: ignore[attr-defined]


def _params() -> list[tuple[str, object, object]]:
    group = typer.main.get_command(app)
    ctx = group.make_context("memdiag", ["replay", "x"], resilient_parsing=True)
    out = [("memdiag", p, ctx) for p in group.get_params(ctx)]
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        sub = command.make_context(name, [], parent=ctx, resilient_parsing=True)
        out += [(name, p, sub) for p in command.get_params(sub)]
    return out


PARAMS = _params()


def _kind(param: object) -> str:
    d = param.type_descriptor  # type: ignore[attr-defined]
    info = d.parameter_info
    return f"{d.annotation!r} case_sensitive={info.case_sensitive} path_type={info.path_type}"


# one parameter of each kind (type and the settings that change its coercion)
KINDS = {_kind(p): (p, ctx) for _, p, ctx in reversed(PARAMS)}
SPELLINGS = st.one_of(
    st.from_regex(r"[+-]?[0-9]{1,25}", fullmatch=True),
    st.from_regex(r"[+-]?[0-9]{0,20}\.?[0-9]{0,20}([eE][+-]?[0-9]{1,4})?", fullmatch=True),
    st.sampled_from(
        [
            "",
            " 1",
            "1 ",
            "1_000",
            "0x10",
            "inf",
            "-nan",
            "1e400",
            "٣",
            "Ⅻ",
            "json",
            "JSON",
            "table",
            "Table",
            "jsonl",
            "-",
            ".",
            "a\0b",
            "true",
            "no",
            "1.5",
            "+.5",
            "5.",
            "1e5",
        ]
    ),
    st.text(max_size=12),
)


def _outcome(runtime: object, param: object, ctx: object, value: object) -> tuple[str, object]:
    try:
        got = runtime.coerce(value, param=param, ctx=ctx)  # type: ignore[attr-defined]
    except Exc as exc:
        return ("error", exc.format_message())
    return ("ok", (type(got), repr(got)))  # repr: nan equals nan


def test_every_memdiag_parameter_gets_a_fast_coercer():
    slow = [
        f"{cmd} {p.name}"  # type: ignore[attr-defined]
        for cmd, p, _ in PARAMS
        if fast_runtime_param(p.type_descriptor) is None  # type: ignore[attr-defined]
    ]
    assert not slow, f"parameters left to pydantic: {slow}"


@pytest.mark.parametrize("kind", sorted(KINDS))
@settings(max_examples=150, deadline=None)
@given(value=SPELLINGS, many=st.booleans())
def test_fast_coercion_equals_typers_own(kind, value, many):
    param, ctx = KINDS[kind]
    descriptor = param.type_descriptor  # type: ignore[attr-defined]
    fast = fast_runtime_param(descriptor)
    own = _coercion.build_runtime_param(descriptor)
    if descriptor.is_list and many:
        value = (value, value + "1")
    assert _outcome(fast, param, ctx, value) == _outcome(own, param, ctx, value)


@pytest.mark.parametrize("index", range(len(PARAMS)))
def test_defaults_take_the_fast_path(index):
    """What a parameter holds when it is not given: coerced without typer's own adapter."""
    _, param, ctx = PARAMS[index]
    descriptor = param.type_descriptor  # type: ignore[attr-defined]
    fast = fast_runtime_param(descriptor)
    own = _coercion.build_runtime_param(descriptor)
    default = param.default  # type: ignore[attr-defined]
    assert _outcome(fast, param, ctx, default) == _outcome(own, param, ctx, default)
    assert fast._fast[3] == [], f"{param.name}: default {default!r} went to typer's adapter"


@pytest.mark.parametrize(
    "args",
    [
        ["replay", str(FIXTURES / "demo.jsonl"), "--budget", "400", "-f", "json"],
        ["diagnose", str(FIXTURES / "demo.jsonl"), "--budget", "400", "-f", "json"],
        ["check", str(FIXTURES / "checks.yaml"), "--jobs", "1"],
        ["convert", str(FIXTURES / "demo.jsonl")],
    ],
    ids=lambda a: a[0],
)
def test_commands_never_import_pydantic(args):
    code = (
        "import sys\n"
        "from memdiag.cli import app\n"
        "try:\n"
        f"    app({args!r})\n"
        "except SystemExit as e:\n"
        "    assert e.code in (0, 1), e.code\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_bad_values_are_one_line_naming_option_and_value():
    from typer.testing import CliRunner

    r = CliRunner().invoke(app, ["replay", str(FIXTURES / "demo.jsonl"), "--budget", "12x"])
    assert r.exit_code == 2
    assert r.output.strip().splitlines() == [
        "memdiag: --budget: '12x' is not an integer (see memdiag replay --help)"
    ]
    r = CliRunner().invoke(app, ["replay", str(FIXTURES / "demo.jsonl"), "--budget", " 12"])
    assert r.exit_code == 0, r.output  # pydantic strips the blanks: typer's path took it
