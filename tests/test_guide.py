"""The user guide (docs/guide/) says what the code does: its generated lists are current,
every public exception and every counter is in it, its Python blocks run, its snippets
resolve, and the troubleshooting messages are the ones the code produces."""

from __future__ import annotations

import importlib
import inspect
import pathlib
import pkgutil
import re
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

import exon
from exon.core import SharedSecretPolicy

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guide"


def _page(name: str) -> str:
    return (GUIDE / name).read_text()


def test_generated_blocks_are_current() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "docgen.py"), "--check"],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def _public_exception_names() -> set[str]:
    names = set()
    for info in pkgutil.walk_packages(exon.__path__, "exon."):
        if info.name.startswith("exon.bench") or info.name.rsplit(".", 1)[-1].startswith("_"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra is missing: its errors are checked with it
            continue
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, exon.ExonError)
                    and not name.startswith("_") and obj.__module__ == module.__name__):
                names.add(name)
    return names


def test_every_public_exception_is_in_the_threads_page() -> None:
    names = _public_exception_names()
    assert {"ExonError", "Timeout", "BrokenLink", "ArchiveCorrupt", "DriverTimeout"} <= names
    page = _page("threads.md")
    missing = sorted(n for n in names if f"`{n}`" not in page and f".{n}`" not in page)
    assert not missing, f"exceptions missing from docs/guide/threads.md: {missing}"


def test_every_counter_is_in_the_observability_page() -> None:
    from exon.transport.aeron.counters import CounterType, NodeCounter, SystemCounter

    page = _page("observability.md")
    missing = [m.name for m in SystemCounter if f"| {int(m)} | {m.label} |" not in page]
    missing += [t.name for t in CounterType
                if t is not CounterType.SYSTEM and f"`{t.short_name}`" not in page]
    missing += [n.name for n in NodeCounter
                if f"| {int(n)} | `{n.what}` | `{n.name.lower()}` |" not in page]
    assert not missing, f"counters missing from docs/guide/observability.md: {missing}"


def _blocks(language: str) -> Iterator[tuple[str, str]]:
    for page in sorted(GUIDE.glob("*.md")):
        for block in re.findall(rf"```{language}\n(.*?)```", page.read_text(), flags=re.DOTALL):
            yield page.name, block


def test_snippets_resolve() -> None:
    refs = [ref for _, block in _blocks("python")
            for ref in re.findall(r'--8<-- "([^"]+)"', block)]
    assert len(refs) >= 5
    for ref in refs:
        path, _, section = ref.partition(":")
        text = (ROOT / path).read_text()
        if section:
            assert f"--8<-- [start:{section}]" in text, ref
            assert f"--8<-- [end:{section}]" in text, ref


_RUNNABLE = [(name, block) for name, block in _blocks("python") if "--8<--" not in block]


@pytest.mark.net
@pytest.mark.parametrize(("page", "code"), _RUNNABLE,
                         ids=[f"{name}-{i}" for i, (name, _) in enumerate(_RUNNABLE)])
def test_python_blocks_run(page: str, code: str) -> None:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=False, cwd=ROOT)
    assert result.returncode == 0, f"{page}: {result.stderr}"


# ---- troubleshooting: the messages as the code produces them ------------------------------


def _documented_messages() -> dict[int, str]:
    page = _page("troubleshooting.md")
    found = re.findall(r"### (\d+)\. [^\n]*\n\n```text\n(.*?)\n```", page)
    return {int(n): text for n, text in found}


def _shape(message: str) -> str:
    """A message with the parts that differ between runs (node ids, paths, numbers)
    replaced, so that the documented example and a fresh one compare."""
    message = re.sub(r"\b[0-9a-f]{32}\b", "<id>", message)
    message = re.sub(r"\((PEER_GONE|TIMEOUT)\)$", "(<why>)", message)  # a race decides
    message = re.sub(r"(?<![\w.])/[\w./-]+", "<path>", message)
    return re.sub(r"\d+", "<n>", message)


def _raised(call: Callable[[], object]) -> str:
    try:
        call()
    except Exception as exc:
        return f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    raise AssertionError("no exception")


@pytest.mark.net
def test_troubleshooting_messages_are_the_code_s(tmp_path: pathlib.Path) -> None:
    documented = _documented_messages()
    assert sorted(documented) == list(range(1, 11))
    actual: dict[int, str] = {}
    with exon.Node() as a, exon.Node() as b:
        a.socket("pull", tag=1)
        a.socket("rep", tag=3)
        actual[1] = _raised(lambda: b.socket("push").link("127.0.0.1:9/1", timeout=2.0))
        actual[2] = _raised(lambda: b.socket("push").link(f"{a.address}/9", timeout=2))
        actual[3] = _raised(lambda: b.socket("req").link(f"{a.address}/1", timeout=2))
        secret = a.socket("pull", tag=4, policy=SharedSecretPolicy(b"s"))
        actual[4] = _raised(lambda: b.socket("push").link(f"{a.address}/4", timeout=2))
        secret.close()
        actual[5] = _raised(lambda: b.socket("push").send(b"x", timeout=0.2))
        req = b.socket("req")
        req.link(f"{a.address}/3", timeout=2)
        req.send(b"question", timeout=2)
        actual[6] = _raised(lambda: req.send(b"again", timeout=2))
        push = b.socket("push")
        push.link(f"{a.address}/1", timeout=2)
        actual[7] = _raised(lambda: push.send(b"x" * (2 << 20), timeout=2))
    actual[8] = _raised(lambda: exon.Node(driver_dir=str(tmp_path / "no-driver")))
    actual[10] = _raised(lambda: exon.Node(driver_options={"term_buffer_length": 1000}))
    with exon.Node() as server:
        server.socket("rep", tag=2)
        client = exon.Node()
        try:
            req = client.socket("req")
            req.link(f"{server.address}/2", timeout=2)
            req.send(b"question", timeout=2)
            server.close(timeout=0.5)
            actual[9] = _raised(lambda: req.receive(timeout=30))
        finally:
            client.close()
    for n in range(1, 11):
        assert _shape(actual[n]) == _shape(documented[n]), (n, actual[n])
