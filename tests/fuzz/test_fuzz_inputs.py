"""Fuzz every input memdiag reads: every registered transcript format, configs, check specs,
facts files, rules files and flags. Each example mutates a real seed file (tests/fuzz/mutate.py)
and runs a real command on it (tests/fuzz/harness.py checks exit code, output and files)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from memdiag.transcript.formats import formats, get
from tests.fuzz.harness import FIXTURES, fuzz_settings, run_cli
from tests.fuzz.mutate import NASTY_TEXT, json_file, yaml_file

# format → its seed (the first example it declares), for every format the registry lists that is
# read from JSON text, directory readers' session files included (an SQLite database is fuzzed
# as a file elsewhere)
TRANSCRIPTS = {
    f.name: f.examples[0] for f in formats().values() if f.examples[0].endswith((".json", ".jsonl"))
}
N = {"transcript": (3, 800), "config": (8, 900), "spec": (6, 900), "facts": (8, 1000)}
N |= {"rules": (6, 700), "flags": (8, 700)}


def _seed(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def _folder() -> Path:
    """A fresh folder holding copies of the fixtures every command below may read."""
    folder = Path(tempfile.mkdtemp(prefix="memdiag-fuzz-"))
    for f in (
        "demo.jsonl",
        "demo_zh.jsonl",
        "allergy.jsonl",
        "longterm.jsonl",
        "facts.json",
        "facts_records.json",
    ):
        shutil.copy(FIXTURES / f, folder / f)
    return folder


TRANSCRIPT_COMMANDS = [
    ["replay", "T", "--strategy", "all", "--budget", "200", "--format", "json"],
    ["replay", "T", "--budget", "300"],
    ["convert", "T"],
    ["diagnose", "T", "--format", "json", "--budget", "200"],
    ["diagnose", "T", "--fact", "allergic to peanuts"],
]


@pytest.mark.parametrize("fmt", sorted(TRANSCRIPTS))
def test_fuzz_transcripts(fmt: str) -> None:
    name = TRANSCRIPTS[fmt]
    jsonl = name.endswith(".jsonl")
    seed = _seed(name)

    @fuzz_settings(*N["transcript"])
    @given(
        data=json_file(seed, jsonl),
        command=st.sampled_from(TRANSCRIPT_COMMANDS),
        skip=st.booleans(),
        named=st.booleans(),
    )
    def run(data: bytes, command: list[str], skip: bool, named: bool) -> None:
        folder = _folder()
        try:
            suffix = ".jsonl" if jsonl else ".json"
            (folder / f"in{suffix}").write_bytes(data)
            argv = [f"in{suffix}" if a == "T" else a for a in command]
            argv += ["--skip-invalid"] if skip else []
            argv += ["--from", fmt] if named else []
            for choice, flag in getattr(get(fmt), "selects", {}).items():
                if choice == "conversation":  # choose every one (an agent is one or another)
                    argv += [flag, "all"]
            run_cli(f"transcript:{fmt}", argv, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    run()


CONFIG_SEED = """\
model: gpt-4o
encoding: o200k_base
budget: 400
reserve_output: 100
keep_system: true
strategy: sliding_window
overhead: {per_message: 3, reply_priming: 3}
sliding_window: {max_turns: 4}
summary:
  summarizer: extractive
  trigger_tokens: 300
  summary_max_tokens: 80
  keep_recent_tokens: 100
scratchpad: {scratchpad_max_tokens: 60}
store: {facts_file: facts.json, top_k: 3, inject_max_tokens: 200}
audit: {stale_after_days: 30, near_duplicate_threshold: 0.9}
"""


@fuzz_settings(*N["config"])
@given(
    data=yaml_file(CONFIG_SEED),
    command=st.sampled_from(
        [
            ["replay", "demo.jsonl", "--strategy", "all", "--format", "json"],
            ["diagnose", "longterm.jsonl", "--format", "json"],
            ["inspect-store", "--facts-file", "facts.json", "--format", "json"],
        ]
    ),
)
def test_fuzz_config(data: bytes, command: list[str]) -> None:
    folder = _folder()
    try:
        (folder / "memdiag.yaml").write_bytes(data)
        # both ways a config arrives: --config, and ./memdiag.yaml found on its own
        run_cli("config", [*command, "--config", "memdiag.yaml"], folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _spec_seed() -> str:
    spec = yaml.safe_load((FIXTURES / "checks.yaml").read_text(encoding="utf-8"))
    cases = spec["cases"]
    spec["cases"] = cases[:2] + [c for c in cases if "store" in c][:2]  # a store case too
    return yaml.safe_dump(spec, allow_unicode=True, sort_keys=False)


@fuzz_settings(*N["spec"])
@given(data=yaml_file(_spec_seed()), jobs=st.sampled_from([1, 1, 1, 2]))
def test_fuzz_check_specs(data: bytes, jobs: int) -> None:
    folder = _folder()
    try:
        (folder / "spec.yaml").write_bytes(data)
        run_cli("spec", ["check", "spec.yaml", "--format", "json", "--jobs", str(jobs)], folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


FACTS_SEEDS = ["facts.json", "facts_records.json", "longterm_facts.json", "longterm_facts_zh.json"]


@pytest.mark.parametrize("seed", FACTS_SEEDS)
def test_fuzz_facts_files(seed: str) -> None:
    @fuzz_settings(N["facts"][0], N["facts"][1] // len(FACTS_SEEDS))
    @given(
        data=json_file((FIXTURES / seed).read_text(encoding="utf-8"), False),
        command=st.sampled_from(
            [
                ["inspect-store", "--facts-file", "F", "--format", "json"],
                ["inspect-store", "--facts-file", "F", "--stale-after-days", "30"],
                ["diagnose", "longterm.jsonl", "--facts-file", "F", "--format", "json"],
                ["replay", "longterm.jsonl", "--facts-file", "F", "--format", "json"],
            ]
        ),
    )
    def run(data: bytes, command: list[str]) -> None:
        folder = _folder()
        try:
            (folder / "f.json").write_bytes(data)
            run_cli("facts", ["f.json" if a == "F" else a for a in command], folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    run()


def _rules_seed() -> str:
    path = Path(__file__).resolve().parents[2] / "memdiag" / "data" / "rules.yaml"
    rules = yaml.safe_load(path.read_text(encoding="utf-8"))
    rules["rules"] = rules["rules"][:6]
    return yaml.safe_dump(rules, allow_unicode=True, sort_keys=False)


@fuzz_settings(*N["rules"])
@given(data=yaml_file(_rules_seed()), by_flag=st.booleans())
def test_fuzz_rules_files(data: bytes, by_flag: bool) -> None:
    folder = _folder()
    try:
        (folder / "rules.yaml").write_bytes(data)
        argv = ["replay", "demo.jsonl", "--strategy", "scratchpad", "--format", "json"]
        if by_flag:
            argv += ["--rules", "rules.yaml"]
        else:
            (folder / "cfg.yaml").write_text("scratchpad: {rules: rules.yaml}\n", encoding="utf-8")
            argv += ["--config", "cfg.yaml"]
        run_cli("rules", argv, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


NUMBERS = st.one_of(
    st.integers(-(2**64), 2**64).map(str),
    st.sampled_from(["0", "-1", "9" * 30, "9" * 5000, "1e400", "nan", "", "abc", "[bold", "[/]"]),
)
FLAG_VALUES = {
    "--budget": NUMBERS,
    "--max-turns": NUMBERS,
    "--summary-max-tokens": NUMBERS,
    "--trigger-tokens": NUMBERS,
    "--keep-recent-tokens": NUMBERS,
    "--scratchpad-max-tokens": NUMBERS,
    "--at": NUMBERS,
    "--top-k": NUMBERS,
    "--model": st.one_of(st.text(max_size=20), st.sampled_from(["gpt-4o", "gpt-4", "claude-3"])),
    "--encoding": st.one_of(
        st.text(max_size=20), st.sampled_from(["cl100k_base", "o200k_base", "gpt2"])
    ),
    "--strategy": st.one_of(st.text(max_size=20), st.sampled_from(["all", "summary"])),
    "--summarizer": st.one_of(st.text(max_size=12), st.sampled_from(["recorded", "llm"])),
    "--show": st.one_of(st.text(max_size=12), st.sampled_from(["all", "none"])),
    "--fact": st.one_of(st.text(max_size=40), st.sampled_from(NASTY_TEXT)),
    "--fail-on": st.one_of(st.text(max_size=20), st.sampled_from(["short_term,long_term"])),
    "--from": st.one_of(st.text(max_size=12), st.sampled_from(["openai", "locomo"])),
}
REPLAY_ONLY = {"--at", "--top-k", "--fail-on"}


@fuzz_settings(*N["flags"])
@given(
    command=st.sampled_from(["replay", "diagnose"]),
    flags=st.dictionaries(st.sampled_from(sorted(FLAG_VALUES)), st.just(None), max_size=4),
    data=st.data(),
)
def test_fuzz_flags(command: str, flags: dict[str, None], data: st.DataObject) -> None:
    folder = _folder()
    try:
        argv = [command, "demo.jsonl", "--format", "json"]
        for flag in flags:
            if command == "replay" and flag in REPLAY_ONLY:
                continue
            value = data.draw(FLAG_VALUES[flag], label=flag)
            if "\x00" in value:  # argv cannot carry NUL
                continue
            argv += [flag, value]
        run_cli("flags", argv, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
