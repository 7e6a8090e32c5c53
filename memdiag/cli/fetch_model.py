"""`memdiag fetch-model`: the one command that uses the network, and only when it is run
(docs/model.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memdiag.cli.options import QuietOpt
from memdiag.cli.runtime import download_progress, errors, quiet_mode, stderr

EPILOG = (
    "Examples:\n\n"
    "  memdiag fetch-model   (into ~/.cache/chroma/onnx_models/all-MiniLM-L6-v2/onnx/)\n\n"
    "  memdiag fetch-model --dir models/minilm && "
    "export MEMDIAG_ONNX_MODEL_DIR=models/minilm\n\n"
    "  memdiag fetch-model --force   (download and replace a copy you doubt)\n\n"
    "The only command that uses the network, and only when you run it. Offline: copy the "
    "onnx/ folder from a machine that has it and set MEMDIAG_ONNX_MODEL_DIR to the folder "
    "holding it."
)


def fetch_model(
    target: Annotated[
        Path | None,
        typer.Option(
            "--dir",
            help="Install here (a folder that will hold onnx/); default: Chroma's cache.",
        ),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(
            help="Download from this mirror of the same archive (env MEMDIAG_MODEL_URL); the "
            "SHA256 is still chromadb's.",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Download even if the model is already there.")
    ] = False,
    quiet: QuietOpt = False,
) -> None:
    """Download Chroma's default embedding model (ONNX all-MiniLM-L6-v2).

    The archive, URL and SHA256 chromadb itself uses, unpacked into Chroma's cache, where
    chromadb and memdiag both find it. It gives evidence ranking its semantic ranker and lets
    diagnose/check/inspect-store check retrieval from Chroma stores. Prints the model folder.
    """
    with errors():
        quiet_mode(quiet)
        from memdiag.stores.model_fetch import default_url
        from memdiag.stores.model_fetch import fetch_model as fetch

        err = stderr()
        source = url or default_url()
        with download_progress(f"all-MiniLM-L6-v2 from {source}") as tick:
            result = fetch(target, url=url, force=force, progress=tick)
        if result.downloaded:
            err.print(
                f"installed all-MiniLM-L6-v2 ({result.size} bytes, SHA256 verified) "
                f"into {result.model_dir / 'onnx'}",
                markup=False,
            )
        else:
            err.print(
                f"all-MiniLM-L6-v2 is already in {result.model_dir / 'onnx'} (--force "
                "downloads it again)",
                markup=False,
            )
        where = result.model_dir.absolute()
        if target is not None:
            err.print(f"use it with: export MEMDIAG_ONNX_MODEL_DIR={where}", markup=False)
        typer.echo(str(where))
