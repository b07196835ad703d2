"""`dflash-watch buckets` as a user meets it: real files of every format
(a real ``.pt`` saved by torch), the section 8 JSON, exit codes and
one-line errors.

Most cases call the CLI's ``main`` in this process (real files, real
parsing, the real exit code); a few run the command as a subprocess where
the process itself is the point (the JSON on stdout, torch missing).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dflash_watch.cli import main

ROOT = Path(__file__).resolve().parents[2]
LENGTHS = [5, 9, 9, 12, 40, 41, 41, 100, 7, 12, 300, 64]


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["buckets", *args])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code: int, out: str, err: str) -> str:
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("dflash-watch: ") and "Traceback" not in err, err
    return err


def expected_boundaries(k: int) -> list[int]:
    from dflash_watch.buckets.optimal import Histogram, optimal_boundaries

    return optimal_boundaries(Histogram.of(np.array(LENGTHS)), k).tolist()


def write_formats(tmp: Path) -> dict[str, Path]:
    torch = pytest.importorskip("torch", reason="the .pt formats are written by torch (pip install torch)")

    files = {
        "txt": tmp / "l.txt", "npy": tmp / "l.npy", "jsonl": tmp / "l.jsonl", "ids": tmp / "ids.jsonl",
        "pt": tmp / "l.pt", "ptlist": tmp / "list.pt", "npyf": tmp / "float.npy",
    }
    files["txt"].write_text("\n".join(map(str, LENGTHS)) + "\n", encoding="utf-8")
    np.save(files["npy"], np.array(LENGTHS, dtype=np.int32))
    np.save(files["npyf"], np.array(LENGTHS, dtype=np.float64))  # pandas-style whole floats
    files["jsonl"].write_text("".join(json.dumps({"id": i, "num_tokens": n}) + "\n" for i, n in enumerate(LENGTHS)))
    files["ids"].write_text("".join(json.dumps({"input_ids": list(range(n))}) + "\n" for n in LENGTHS))
    torch.save(torch.tensor(LENGTHS, dtype=torch.int64), files["pt"])
    torch.save(list(LENGTHS), files["ptlist"])
    return files


def test_every_format_gives_the_same_optimal_boundaries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = write_formats(tmp_path)
    want = expected_boundaries(3)
    assert want[-1] == 300 and len(want) == 4
    for name, path in files.items():
        code, out, err = run_cli(capsys, str(path), "--k", "3", "--json")
        assert code == 0, (name, err)
        got = json.loads(out)
        assert (got["boundaries"], got["samples"]) == (want, len(LENGTHS)), name


def test_jsonl_field_named_and_the_length_of_a_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps({"length": 1, "tok": n, "input_ids": [0] * 3}) + "\n" for n in LENGTHS) + "\n")
    code, out, _ = run_cli(capsys, str(path), "--k", "3", "--field", "tok", "--json")
    assert code == 0 and json.loads(out)["boundaries"] == expected_boundaries(3)
    code, out, _ = run_cli(capsys, str(path), "--json")  # default: "length" comes first
    assert code == 0 and json.loads(out)["boundaries"] == [0, 1]
    code, out, _ = run_cli(capsys, str(path), "--field", "input_ids", "--json")
    assert code == 0 and json.loads(out)["boundaries"] == [0, 3]


def test_json_is_section_8_with_compare_and_batched(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "l.txt"
    path.write_text("\n".join(map(str, LENGTHS)))  # no final newline
    code, out, err = run_cli(capsys, str(path), "--k", "4", "--compare", "0,10,50,200", "--token-budget", "256",
                             "--max-len", "200", "--json")
    assert code == 0, err
    got = json.loads(out)
    kept = [x for x in LENGTHS if x <= 200]
    assert got["samples"] == len(LENGTHS) and got["left_out"] == {"over_max_len": 1, "empty": 0}
    assert got["boundaries"][0] == 0 and got["boundaries"][-1] == max(kept) and len(got["boundaries"]) == 5
    padded = sum(next(b for b in got["boundaries"] if b >= x) for x in kept)
    assert got["padding_efficiency"] == pytest.approx(sum(kept) / padded, abs=1e-6)
    cmp = got["compare"]
    assert cmp["boundaries"] == [0, 10, 50, 200] and cmp["left_out"] == {"over_last_boundary": 0}
    cmp_padded = sum(next(b for b in (10, 50, 200) if b >= x) for x in kept)
    assert cmp["padding_efficiency"] == pytest.approx(sum(kept) / cmp_padded, abs=1e-6)
    assert got["padding_efficiency"] >= cmp["padding_efficiency"]
    for part in (got, cmp):
        assert part["padding_efficiency"] <= part["batched"] <= 1.0  # padded to the longest, not the boundary
        assert part["batches"]["count"] >= len(part["per_bucket"])
    assert sum(b["samples"] for b in got["per_bucket"]) == len(kept)


def test_text_output_says_fewer_buckets_and_shows_compare_side_by_side(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "few.txt"
    path.write_text("8\n8\n16\n3\n")
    code, out, _ = run_cli(capsys, str(path), "--k", "6", "--compare", "4,16")
    assert code == 0
    assert "K=3: 0,3,8,16" in out and "asked for 6" in out and "only 3 distinct" in out
    assert "padding efficiency: 100.00%" in out
    assert "compare boundaries:  0,4,16" in out and "|" in out
    assert "optimal pads 17 fewer tokens" in out  # compare pads 3->4 and 8,8->16: 4+16+16+16 vs 3+8+8+16
    code, out, _ = run_cli(capsys, str(path), "--compare", "0,2", "--json")
    assert code == 0 and json.loads(out)["compare"]["padding_efficiency"] is None  # covers no sample


@pytest.mark.parametrize("content, args, fragment", [
    (None, (), "no such file"),
    ("", (), "no lengths in the file"),
    ("\n \n", (), "no lengths in the file"),
    ("12\n-3\n", (), "l.txt:2: negative length -3"),
    ("12\n7.5\n", (), "l.txt:2: '7.5' is not a whole number"),
    ("12\nabc\n", (), "l.txt:2: 'abc' is not a whole number"),
    ("12\n", ("--compare", "0,900,800"), "strictly increasing (900 then 800)"),
    ("12\n", ("--compare", "0,x"), "'x' is not a whole number"),
    ("12\n", ("--k", "0"), "--k 0"),
    ("12\n", ("--token-budget", "0"), "--token-budget 0"),
    ("12\n", ("--field", "n"), "--field applies to .jsonl"),
    ("12\n90\n", ("--max-len", "5"), "all 2 are longer than --max-len 5"),
    ("0\n0\n", (), "all 2 are of length 0"),
    ("12\n" + "9" * 25 + "\n", (), "l.txt:2: length '" + "9" * 25 + "' is too large"),
])
def test_bad_text_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               content: str | None, args: tuple[str, ...], fragment: str) -> None:
    path = tmp_path / "l.txt"
    if content is not None:
        path.write_text(content)
    err = one_line_error(*run_cli(capsys, str(path), *args))
    assert fragment in err, err


def test_bad_files_of_the_other_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch", reason="the .pt formats are read by torch (pip install torch)")

    cases = []
    p = tmp_path / "two.npy"
    np.save(p, np.ones((3, 2), dtype=np.int64))
    cases.append((p, (), "expected a 1-D array of lengths, got shape (3, 2)"))
    p = tmp_path / "half.npy"
    np.save(p, np.array([3.0, 4.5]))
    cases.append((p, (), "element 1 is 4.5, not a whole number"))
    p = tmp_path / "neg.npy"
    np.save(p, np.array([3, -4]))
    cases.append((p, (), "element 1 is a negative length (-4)"))
    p = tmp_path / "obj.npy"
    np.save(p, np.array([3, "x"], dtype=object), allow_pickle=True)
    cases.append((p, (), "not a numeric .npy array"))
    p = tmp_path / "junk.npy"
    p.write_bytes(b"not numpy at all")
    cases.append((p, (), "not a"))
    p = tmp_path / "d.pt"
    torch.save({"lengths": torch.tensor([1, 2])}, p)
    cases.append((p, (), "holds a dict, expected a 1-D tensor or a list"))
    p = tmp_path / "f.pt"
    torch.save(torch.tensor([1.0, 2.5]), p)
    cases.append((p, (), "element 1 is 2.5"))
    p = tmp_path / "bad.jsonl"
    p.write_text('{"length": 4}\n{"length": 2.5}\n')
    cases.append((p, (), "bad.jsonl:2: '2.5' is not a whole number"))
    p = tmp_path / "nofield.jsonl"
    p.write_text('{"length": 4}\n{"len": 2}\n')
    cases.append((p, (), "nofield.jsonl:2: no field 'length'"))
    p = tmp_path / "none.jsonl"
    p.write_text('{"tokens_total": 4}\n')
    cases.append((p, (), "no length field (tried length, len, num_tokens, seq_len, input_ids"))
    p = tmp_path / "broken.jsonl"
    p.write_text('{"length": 4}\n{"length": \n')
    cases.append((p, (), "broken.jsonl:2: not a JSON line"))
    p = tmp_path / "str.jsonl"
    p.write_text('{"length": "4"}\n')
    cases.append((p, (), "field 'length' is str, not a length"))
    p = tmp_path / "l.csv"
    p.write_text("4\n")
    cases.append((p, (), "unknown lengths format '.csv'"))
    cases.append((tmp_path, (), "unknown lengths format"))
    d = tmp_path / "dir.txt"
    d.mkdir()
    cases.append((d, (), "is a directory"))
    for path, args, fragment in cases:
        err = one_line_error(*run_cli(capsys, str(path), *args))
        assert fragment in err, (path.name, err)


def test_a_pt_file_that_would_run_code_is_refused_not_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """weights_only=True: a pickle's payload is data, never executed."""
    import pickle

    pytest.importorskip("torch", reason="a .pt file is read by torch.load (pip install torch)")

    marker = tmp_path / "ran"
    payload = tmp_path / "evil.pt"

    class Evil:
        def __reduce__(self):  # noqa: ANN204
            return (os.system, (f"touch {marker}",))

    payload.write_bytes(pickle.dumps(Evil(), protocol=2))
    err = one_line_error(*run_cli(capsys, str(payload)))
    assert "cannot load with torch.load(weights_only=True)" in err
    assert not marker.exists()


def test_a_file_name_cannot_drive_the_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x\x1b[31mred.txt"
    path.write_text("4\n9\n")
    code, out, _ = run_cli(capsys, str(path))
    assert code == 0 and "\x1b" not in out and "\\x1b[31mred.txt" in out
    err = one_line_error(*run_cli(capsys, str(tmp_path / "gone\x1b]0;title\x07.txt")))
    assert "\x1b" not in err and "\x07" not in err and "no such file" in err


def cli_process(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dflash_watch.cli", "buckets", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_command_prints_json_on_stdout(tmp_path: Path) -> None:
    path = tmp_path / "l.txt"
    path.write_text("\n".join(map(str, LENGTHS)))
    out = cli_process(str(path), "--k", "2", "--json")
    assert out.returncode == 0 and out.stderr == ""
    got = json.loads(out.stdout)
    assert got["boundaries"] == expected_boundaries(2) and got["samples"] == len(LENGTHS)
    assert set(got) >= {"boundaries", "padding_efficiency", "samples"}


def test_pt_without_torch_is_a_clear_exit_2(tmp_path: Path) -> None:
    """A real interpreter in which ``import torch`` fails (a shadowing
    package that raises ImportError, as an absent torch does)."""
    shadow = tmp_path / "shadow" / "torch"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named torch')\n")
    path = tmp_path / "l.pt"
    path.write_bytes(b"whatever")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "shadow"), str(ROOT)])}
    out = cli_process(str(path), env=env)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().endswith(
        "reading .pt needs torch (pip install torch), or save the lengths as .npy or .txt")
    assert out.stderr.count("\n") == 1
