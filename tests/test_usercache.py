"""The user cache: tiktoken ranks and shipped YAML kept in a compact, hash-checked form."""

from __future__ import annotations

import marshal
from pathlib import Path

import pytest

from memdiag import tokens, usercache, yamlio
from memdiag.tokens import BUNDLED, TokenCounter, bundled_ranks, get_encoding

TEXTS = ["Hello, I'm Mia.", "我对花生过敏", "naïve café — 12,345 tokens?", "<|endoftext|> x"]
RULES = Path(tokens.__file__).parent / "data" / "rules.yaml"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("MEMDIAG_CACHE_DIR", str(root))
    get_encoding.cache_clear()
    yield root
    get_encoding.cache_clear()


def _decode_forbidden(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make decoding the rank file fail, so a pass proves the compact cache was read."""
    import tiktoken.load

    def boom(*args: object, **kwargs: object) -> dict[bytes, int]:
        raise AssertionError("rank file decoded although the cache is valid")

    monkeypatch.setattr(tiktoken.load, "load_tiktoken_bpe", boom)


def _entry(name: str) -> Path:
    path = usercache.entry("tiktoken", f"{name}-{BUNDLED[name][:16]}")
    assert path is not None
    return path


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_ranks_cached_once_then_read(name: str, cache: Path, monkeypatch: pytest.MonkeyPatch):
    from importlib import resources

    from tiktoken.load import load_tiktoken_bpe

    expected = load_tiktoken_bpe(
        str(resources.files("memdiag") / "data" / "tiktoken" / f"{name}.tiktoken"),
        expected_hash=BUNDLED[name],
    )
    first = TokenCounter(name).count_many(TEXTS)
    assert _entry(name).is_file()
    _decode_forbidden(monkeypatch)
    get_encoding.cache_clear()
    assert bundled_ranks(name) == expected
    assert TokenCounter(name).count_many(TEXTS) == first


def test_corrupt_or_stale_cache_is_rebuilt(cache: Path):
    TokenCounter("o200k_base")
    path = _entry("o200k_base")
    good = path.read_bytes()
    # flip one byte of the payload: the content hash no longer matches
    bad = bytearray(good)
    bad[-100] ^= 0xFF
    path.write_bytes(bytes(bad))
    get_encoding.cache_clear()
    assert TokenCounter("o200k_base").count("hello world") == 2
    assert path.read_bytes() == good
    # an entry written for other ranks (stale key) is not trusted either
    path.write_bytes(good.replace(good[16:48], b"\0" * 32, 1))
    assert usercache.read_checked(path, BUNDLED["o200k_base"].encode()) is None
    assert len(bundled_ranks("o200k_base")) == 199998
    assert path.read_bytes() == good


def test_truncated_or_foreign_file_is_ignored(cache: Path):
    bundled_ranks("cl100k_base")
    path = _entry("cl100k_base")
    for junk in (b"", b"memdiag-cache/1\n", b"not a cache file at all" * 10):
        path.write_bytes(junk)
        assert len(bundled_ranks("cl100k_base")) == 100256


def test_unwritable_cache_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("the cache dir cannot be created under a file")
    monkeypatch.setenv("MEMDIAG_CACHE_DIR", str(blocker / "memdiag"))
    get_encoding.cache_clear()
    assert TokenCounter("o200k_base").count("hello world") == 2
    assert blocker.read_text().startswith("the cache")


def test_read_only_cache_dir_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A cache dir that exists but refuses writes (as root, chmod cannot show it: refuse here)."""
    ro = tmp_path / "ro"
    ro.mkdir()

    def refuse(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(13, "Permission denied", str(ro))

    import tempfile

    monkeypatch.setattr(tempfile, "mkstemp", refuse)  # the cache writes through fileio's
    monkeypatch.setenv("MEMDIAG_CACHE_DIR", str(ro))
    get_encoding.cache_clear()
    assert TokenCounter("o200k_base").count("hello world") == 2
    assert yamlio.load_yaml_shipped(RULES)["version"] == 1
    assert [p for p in ro.rglob("*") if p.is_file()] == []
    get_encoding.cache_clear()


def test_disabled_cache_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MEMDIAG_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert usercache.cache_dir() is None
    assert usercache.entry("tiktoken", "x") is None
    get_encoding.cache_clear()
    assert TokenCounter("o200k_base").count("hello world") == 2
    assert not (tmp_path / "xdg").exists()


def test_cache_dir_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("MEMDIAG_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert usercache.cache_dir() == tmp_path / "xdg" / "memdiag"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the XDG spec: absolute only
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(usercache.sys, "platform", "linux")
    assert usercache.cache_dir() == tmp_path / "home" / ".cache" / "memdiag"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setattr(usercache.sys, "platform", "darwin")
    assert usercache.cache_dir() == tmp_path / "home" / "Library" / "Caches" / "memdiag"
    monkeypatch.setattr(usercache.sys, "platform", "win32")
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "local"))
    assert usercache.cache_dir() == tmp_path / "local" / "memdiag" / "Cache"


def test_write_atomic_leaves_no_temp_files(tmp_path: Path):
    target = tmp_path / "d" / "entry.marshal"
    assert usercache.write_atomic(target, b"one")
    assert usercache.write_atomic(target, b"two")
    assert target.read_bytes() == b"two"
    assert [p.name for p in target.parent.iterdir()] == ["entry.marshal"]


def test_shipped_yaml_is_parsed_once(cache: Path, monkeypatch: pytest.MonkeyPatch):
    parsed = yamlio.load_yaml(RULES)
    first = yamlio.load_yaml_shipped(RULES)
    assert first == parsed
    entries = list((cache / "yaml").iterdir())
    assert len(entries) == 1

    def no_parse(path: object) -> object:
        raise AssertionError("parsed although the cache is valid")

    monkeypatch.setattr(yamlio, "load_yaml", no_parse)
    assert yamlio.load_yaml_shipped(RULES) == parsed
    # a corrupt entry is not trusted: the file is parsed again
    entries[0].write_bytes(entries[0].read_bytes()[:-10])
    monkeypatch.undo()
    monkeypatch.setenv("MEMDIAG_CACHE_DIR", str(cache))
    assert yamlio.load_yaml_shipped(RULES) == parsed


def test_shipped_yaml_key_follows_content(cache: Path, tmp_path: Path):
    f = tmp_path / "rules.yaml"
    f.write_text("a: 1\n")
    assert yamlio.load_yaml_shipped(f) == {"a": 1}
    f.write_text("a: 2\n")
    assert yamlio.load_yaml_shipped(f) == {"a": 2}
    f.write_text("when: 2024-01-02\n")  # a date: marshal cannot hold it, parsed every time
    assert str(yamlio.load_yaml_shipped(f)["when"]) == "2024-01-02"


def test_marshal_payload_is_plain_data(cache: Path):
    yamlio.load_yaml_shipped(RULES)
    (entry,) = (cache / "yaml").iterdir()
    payload = usercache.read_checked(
        entry, __import__("hashlib").sha256(RULES.read_bytes()).digest()
    )
    assert payload is not None
    data = marshal.loads(payload)
    assert type(data) is dict and data["version"] == 1


def test_a_shipped_file_is_the_package_data_importlib_resources_finds() -> None:
    from importlib import resources

    from memdiag.fileio import shipped_file

    for parts in (("data", "rules.yaml"), ("data", "tiktoken", "cl100k_base.tiktoken")):
        with shipped_file(*parts) as path:
            data = path.read_bytes()
        assert data == resources.files("memdiag").joinpath(*parts).read_bytes()
