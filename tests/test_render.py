"""The output formats are a closed enum, and each one renders every command (pip-audit style)."""

from __future__ import annotations

import inspect

import pytest

from memdiag.render import COMMANDS, OutputFormat
from memdiag.render.renderers import RENDERERS, Renderer


@pytest.mark.parametrize("fmt", list(OutputFormat))
def test_every_format_has_a_renderer_for_every_command(fmt: OutputFormat) -> None:
    renderer = fmt.to_renderer()  # an abstract method left out would make this raise
    assert isinstance(renderer, Renderer)
    for command in COMMANDS:
        method = getattr(renderer, command)
        assert callable(method) and not getattr(method, "__isabstractmethod__", False)


def test_the_renderer_interface_is_the_command_list() -> None:
    abstract = {name for name, _ in inspect.getmembers(Renderer) if not name.startswith("_")}
    assert abstract == set(COMMANDS)
    assert set(RENDERERS) == {f.value for f in OutputFormat}


def test_a_renderer_missing_a_command_cannot_be_built() -> None:
    class Partial(Renderer):
        def replay(self, report, show):  # type: ignore[no-untyped-def]
            pass

    with pytest.raises(TypeError, match="abstract"):
        Partial()  # type: ignore[abstract]
