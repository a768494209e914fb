"""``exon bench plot``: bench JSON lines to a figure (matplotlib, the plot extra)."""

from __future__ import annotations

import importlib.util
import pathlib
import struct
import subprocess
import sys

import pytest
from click.testing import CliRunner

from exon.bench.plot import load_results
from exon.cli import main
from exon.errors import ConfigurationError

FIXTURE = pathlib.Path(__file__).parent / "data" / "plot_fixture.jsonl"


def _require_matplotlib() -> None:
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib is not installed (pip install 'exon[plot]')")


def _png_size(path: pathlib.Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_a_png_from_the_fixture_has_the_expected_size(tmp_path: pathlib.Path) -> None:
    _require_matplotlib()
    out = tmp_path / "bench.png"
    result = CliRunner().invoke(main, ["bench", "plot", str(FIXTURE), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == str(out)
    # 10 x (1.2 + 0.55 x 5 cases + 0.9 x 2 panels) inches at 100 dpi
    assert _png_size(out) == (1000, 575)


def test_an_svg_draws_every_case_and_its_ratio(tmp_path: pathlib.Path) -> None:
    _require_matplotlib()
    out = tmp_path / "bench.svg"
    result = CliRunner().invoke(main, ["bench", "plot", str(FIXTURE), "-o", str(out),
                                       "--title", "fixture"])
    assert result.exit_code == 0, result.output
    svg = out.read_text()
    assert svg.lstrip().startswith("<?xml")
    assert "<svg" in svg
    # matplotlib writes text as glyph paths with the string in a comment
    for text in ("push_pull_64B", "push_pull_1024B", "req_rep_64B_p99",
                 "native-ipc-throughput-32B", "x1.94", "x2.23", "fixture",
                 "us (lower is better)", "msgs/s (higher is better)"):
        assert f"<!-- {text} -->" in svg, text


def test_results_are_read_per_case_with_repeats_and_directions() -> None:
    cases = {c.name: c for c in load_results(FIXTURE.read_text().splitlines())}
    assert list(cases) == ["push_pull_64B", "push_pull_1024B", "req_rep_64B_p50",
                           "req_rep_64B_p99", "native-ipc-throughput-32B"]
    assert cases["push_pull_64B"].exon == [1250000.0, 1180000.0]
    assert cases["push_pull_64B"].peer == [610000.0, 640000.0]
    assert cases["req_rep_64B_p50"].higher_is_better is False
    assert cases["req_rep_64B_p99"].higher_is_better is False  # from the unit "us"
    assert cases["native-ipc-throughput-32B"].peer == []


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "results, line 2: not JSON"),
    ('["a list"]', "results, line 2: not a bench result"),
    ('{"case": "x", "unit": "us", "exon": "fast"}', "results, line 2: 'exon' is 'fast', "
                                                      "not a number"),
    ('{"case": "x", "unit": "us", "exon": NaN}', "results, line 2: 'exon' is nan"),
    ('{"case": "push_pull_64B", "unit": "us", "exon": 1}', "case 'push_pull_64B' in 'us', "
                                                             "earlier in 'msgs/s'"),
])
def test_bad_lines_are_named(line: str, message: str) -> None:
    first = '{"case": "push_pull_64B", "unit": "msgs/s", "exon": 5, "peer": 4}'
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(")):
        load_results([first, line])


def test_empty_results_and_unknown_formats_are_refused(tmp_path: pathlib.Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    result = CliRunner().invoke(main, ["bench", "plot", str(empty), "-o",
                                       str(tmp_path / "x.png")])
    assert result.exit_code == 1
    assert "no bench results in it" in result.output
    result = CliRunner().invoke(main, ["bench", "plot", str(FIXTURE), "-o",
                                       str(tmp_path / "x.gif")])
    assert result.exit_code == 1
    assert "one of .png, .svg, .pdf" in result.output


def test_without_matplotlib_the_error_names_the_extra(tmp_path: pathlib.Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    result = CliRunner().invoke(main, ["bench", "plot", str(FIXTURE), "-o",
                                       str(tmp_path / "x.png")])
    assert result.exit_code == 1
    assert "plotting needs the plot extra (pip install 'exon[plot]')" in result.output
    assert not (tmp_path / "x.png").exists()


def test_what_a_bench_prints_can_be_saved_and_plotted(tmp_path: pathlib.Path) -> None:
    _require_matplotlib()
    saved = tmp_path / "transport.jsonl"
    with saved.open("w") as out:
        subprocess.run([sys.executable, "-m", "exon.cli", "bench", "transport", "--vs", "none",
                        "--size", "32", "--seconds", "0.2", "--messages", "2000"],
                       stdout=out, timeout=300, check=True)
    cases = load_results(saved.read_text().splitlines(), source=str(saved))
    assert [c.name for c in cases] == ["native-ipc-throughput-32B", "python-ipc-throughput-64B"]
    assert all(c.exon and c.exon[0] > 0 and c.higher_is_better for c in cases)
    png = tmp_path / "transport.png"
    result = CliRunner().invoke(main, ["bench", "plot", str(saved), "-o", str(png)])
    assert result.exit_code == 0, result.output
    assert _png_size(png)[0] == 1000
