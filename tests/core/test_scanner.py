"""The literal scanners: every engine finds exactly the lines that hold a literal."""

from __future__ import annotations

import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dflash_watch.parsers.crash.tracebacks import TRIGGERS
from dflash_watch.parsers.progress import CANDIDATES
from dflash_watch.parsers.scanner import HyperscanScanner, RegexScanner, build_scanner, make_scanner

LITERALS = tuple(TRIGGERS) + CANDIDATES


def expected_ends(text: str, literals: tuple[str, ...]) -> list[int]:
    """The definition, one line at a time."""
    ends, start = [], 0
    while start < len(text):
        end = text.find("\n", start)
        if end == -1:
            end = len(text)
        if any(lit in text[start:end] for lit in literals):
            ends.append(end)
        start = end + 1
    return ends


def engines() -> list[str]:
    try:
        import hyperscan  # noqa: F401
    except ImportError:
        return ["re"]
    return ["re", "hyperscan"]


def test_regex_scanner_finds_every_literal_occurrence() -> None:
    literals = ("Traceback (most recent call last)", 'File "', "Error", "tep", "tok", "it/s", "s/it", "loss", "%|")
    scanners = build_scanner(literals)
    assert len(scanners) < len(literals)
    for literal in literals:
        text = "xx " + literal + " yy"
        hits = [m for p in scanners for m in p.finditer(text + "\nnext line")]
        assert hits, literal
        assert {m.end() for m in hits} == {len(text)}  # one hit per line, ending at its end
    assert not [m for p in scanners for m in p.finditer("nothing to see here at all, tee, lo, Err, it/")]


@pytest.mark.parametrize("engine", engines())
def test_each_literal_anywhere_on_a_line(engine: str) -> None:
    scanner = make_scanner(LITERALS, engine=engine)
    for literal in LITERALS:
        for text in (literal, "a " + literal + " b\n", "x\n" + literal, "x\n\n" + literal + "\ny\n"):
            assert sorted(set(scanner.ends(text))) == expected_ends(text, LITERALS), (literal, text)
    assert scanner.ends("nothing to see here at all, tee, lo, Err, it/\n") == []


# Text made of pieces of the literals, so that near misses ("te", "Erro") and
# hits straddling nothing are common, with newlines, '\r' and non-ASCII.
_pieces = st.sampled_from(
    [*LITERALS, *(lit[: len(lit) // 2] for lit in LITERALS), *(lit[1:] for lit in LITERALS),
     "\n", "\r", " ", "x", "é", "\u2028", "ß", "0", "[rank3]: "]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_pieces, max_size=40).map("".join))
def test_every_engine_agrees_with_the_definition(text: str) -> None:
    want = expected_ends(text, LITERALS)
    for engine in engines():
        assert sorted(set(make_scanner(LITERALS, engine=engine).ends(text))) == want, engine


# A user's literal with a '?' rules out the '?' placeholder for other
# characters: such chunks take the UTF-8 path.
QUESTION = ("eta?", "loss")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["eta", "?", "loss", "é", "\n", "x", "█", "\ud800", "?\n"]), max_size=30).map("".join))
def test_literals_with_a_question_mark_agree_with_the_definition(text: str) -> None:
    want = expected_ends(text, QUESTION)
    for engine in engines():
        assert sorted(set(make_scanner(QUESTION, engine=engine).ends(text))) == want, engine


def test_hyperscan_answers_in_characters_on_non_ascii_chunks() -> None:
    hyperscan = pytest.importorskip("hyperscan", reason="hyperscan is not installed on this platform")
    scanner = HyperscanScanner(LITERALS, hyperscan)
    ascii_text = "step 1 | loss 2.0\nnoise\nRuntimeError: x\n"
    assert scanner.ends(ascii_text) == [17, 39]
    # Multi-byte characters (tqdm's block bars, a lone surrogate) shift byte
    # offsets from character offsets: the answer must be in characters.
    wide = "é step 1 | loss 2.0\n███ 9/10 [00:01, 9.8it/s]\nnoise \ud800\nRuntimeError: x"
    assert scanner.ends(wide) == expected_ends(wide, LITERALS) == [19, 45, len(wide)]


def test_hyperscan_reports_a_line_once_however_many_literals_it_holds() -> None:
    pytest.importorskip("hyperscan", reason="hyperscan is not installed on this platform")
    scanner = make_scanner(LITERALS, engine="hyperscan")
    text = "step 1 loss 2 tok 3 it/s Error File \"x\" tep tep tep\n" * 3
    assert scanner.ends(text) == [51, 103, 155]


def test_make_scanner_choices() -> None:
    assert isinstance(make_scanner(LITERALS, engine="re"), RegexScanner)
    with pytest.raises(ValueError, match="unknown scanner engine"):
        make_scanner(LITERALS, engine="grep")
    with pytest.raises(ValueError, match="ASCII"):
        make_scanner(("naïve",), engine="hyperscan")
    assert isinstance(make_scanner(("naïve",)), RegexScanner)  # auto falls back


def test_literals_hyperscan_cannot_compile_fall_back_to_re() -> None:
    hyperscan = pytest.importorskip("hyperscan", reason="hyperscan is not installed on this platform")
    literals = ("a\x00b", "step")  # the NUL ends Hyperscan's C string: a broken pattern
    scanner = make_scanner(literals)
    assert isinstance(scanner, RegexScanner)
    assert scanner.ends("x\na\x00b\nstep 1\n") == [5, 12]
    with pytest.raises(hyperscan.error):
        make_scanner(literals, engine="hyperscan")
    assert make_scanner((), engine="auto").ends("anything\n") == []


def test_two_streams_share_one_database_and_scan_in_parallel() -> None:
    """A watch of many per-rank logs compiles once; each stream's scanner
    has its own scratch space, so two of them may scan at the same time
    (one scanner is used by one thread at a time, as one stream is)."""
    pytest.importorskip("hyperscan", reason="hyperscan is not installed on this platform")
    import threading

    a = make_scanner(LITERALS, engine="hyperscan")
    b = make_scanner(LITERALS, engine="hyperscan")
    assert a._db is b._db and a._scratch is not b._scratch
    text = "".join(f"noise {i}\nstep {i} | loss 2.0\nRuntimeError: {i}\n" for i in range(20000))
    want = expected_ends(text, LITERALS)
    got: dict[str, list[int]] = {}

    def scan(name: str, scanner) -> None:  # noqa: ANN001
        for _ in range(3):
            got[name] = scanner.ends(text)

    threads = [threading.Thread(target=scan, args=(n, s)) for n, s in (("a", a), ("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == {"a": want, "b": want}


@pytest.mark.parametrize("kernels", ["built", "none"])
def test_hyperscan_match_handler_in_c_and_in_python_agree(kernels: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The match handler is ``native.match_end`` where the kernels are built,
    a Python function where not: the same ends either way."""
    hyperscan = pytest.importorskip("hyperscan", reason="hyperscan is not installed on this platform")
    from dflash_watch.parsers import native
    from dflash_watch.parsers import scanner as scanner_module

    if kernels == "built" and native.KERNELS is None:
        pytest.skip(f"no compiled kernels: {native.status()}")
    monkeypatch.setattr(scanner_module, "KERNELS", native.KERNELS if kernels == "built" else None)
    scanner = HyperscanScanner(LITERALS, hyperscan)
    texts = [
        "", "\n", "loss", "step 1 | loss 2.0\nnoise\nRuntimeError: x\n", "noise\n" * 5 + "Traceback x",
        "é step 1 | loss 2.0\n███ 9/10 [00:01, 9.8it/s]\nnoise \ud800\nRuntimeError: x",
        "".join(f"line {i} {'tok/s' if i % 3 else 'x'}\n" for i in range(500)),
    ]
    for text in texts:
        assert scanner.ends(text) == expected_ends(text, LITERALS), text[:40]
    if kernels == "built":  # and the kernel's handler is the one Hyperscan calls
        calls: list[int] = []

        def counted(*args: object) -> None:
            calls.append(1)
            native.KERNELS.match_end(*args)  # type: ignore[union-attr, arg-type]

        monkeypatch.setattr(
            scanner_module, "KERNELS", types.SimpleNamespace(match_end=counted, ascii_bytes=native.KERNELS.ascii_bytes)  # type: ignore[union-attr]
        )
        assert scanner.ends(texts[3]) == [17, 39] and len(calls) == 2
