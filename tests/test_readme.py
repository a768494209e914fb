"""The README's examples run as written."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


@pytest.mark.net
@pytest.mark.parametrize("index", range(len(_python_blocks())))
def test_readme_python_example_runs(index: int, tmp_path: pathlib.Path) -> None:
    code = _python_blocks()[index].replace("/dev/shm/exon-demo", str(tmp_path / "driver"))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip(), "the example printed nothing"


def test_readme_quickstart_has_exactly_two_commands() -> None:
    quickstart = README.read_text().split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)```", quickstart, flags=re.DOTALL)
    assert len(commands) == 2
    assert "exon node" in commands[0]
    ci = (README.parent / ".ci" / "run").read_text()
    assert "pytest -q" in commands[1]
    assert "python -m pytest -q" in ci
    # the README's test command installs what CI installs: the test, spark, docs and plot
    # extras
    readme_install = re.findall(r"pip install (?:-q )?-e '(\.\[[^]]*\])'", commands[1])
    ci_install = re.findall(r"pip install (?:-q )?-e '(\.\[[^]]*\])'", ci)
    assert readme_install == ci_install == [".[test,spark,docs,plot]"]
