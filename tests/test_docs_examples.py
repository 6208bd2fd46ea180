"""Every fenced Python block in README.md and docs/*.md runs, and prints what the page says it prints.

The convention, for whoever writes a page:

- Each block fenced as ```python or ```py runs. A page's blocks run in order, in one namespace (a
  later block may use an earlier block's names), in a fresh interpreter per page, with
  ``AMPCORE_DEVICE=cpu`` and a temporary working directory.
- A block whose expected output the page shows is followed by the line ``<!-- output -->`` and then
  a ```text block holding exactly what the block prints. ``...`` in it matches any text (doctest's
  ELLIPSIS), for values that vary from run to run; trailing spaces are ignored. A block without an
  output block must still run, but what it prints is not compared.
- A block that cannot run here (it needs a GPU, or it is deliberately partial) has the line
  ``<!-- skip: the reason -->`` right before its fence; the test skips it with that reason.
- A block that needs an optional package has ``<!-- requires: module (how to install it) -->``
  right before its fence: it runs where ``module`` imports, and skips with the hint where not.

Each block is one test, named ``page:line``; a block that raises fails with its traceback, and the
blocks after it on the page fail too unless they are skipped.
"""

from __future__ import annotations

import doctest
import functools
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
SKIP = re.compile(r"<!--\s*skip:\s*(.*?)\s*-->\s*$")
REQUIRES = re.compile(r"<!--\s*requires:\s*([\w.]+)\s*(.*?)\s*-->\s*$")
OUTPUT_MARK = "<!-- output -->"


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # the line of the opening fence, 1-based
    code: str
    skip: str | None  # the reason, when the page marks the block to skip
    output: str | None  # what the page says the block prints

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _line_before(text: str, offset: int) -> str:
    before = text[:offset].rstrip("\n").rsplit("\n", 1)
    return before[-1].strip()


def blocks_of(page: Path) -> list[Block]:
    """The page's Python blocks, each with its skip reason and the output block that follows it."""
    text = page.read_text(encoding="utf-8")
    fences = list(FENCE.finditer(text))
    found = []
    for i, fence in enumerate(fences):
        if fence.group(1) not in ("python", "py"):
            continue
        marker = _line_before(text, fence.start())
        skip = SKIP.search(marker)
        requires = REQUIRES.search(marker)
        reason = skip.group(1) if skip else None
        if requires and importlib.util.find_spec(requires.group(1).split(".")[0]) is None:
            reason = f"needs {requires.group(1)}, which is not installed {requires.group(2)}".rstrip()
        output = None
        following = fences[i + 1] if i + 1 < len(fences) else None
        if following is not None:
            between = text[fence.end() : following.start()].strip()
            if between == OUTPUT_MARK:
                if following.group(1) != "text":
                    raise AssertionError(f"{page.name}: the block after {OUTPUT_MARK} must be ```text")
                output = following.group(2)
        line = text.count("\n", 0, fence.start()) + 1
        found.append(Block(page, line, fence.group(2), reason, output))
    return found


ALL_BLOCKS = [block for page in PAGES for block in blocks_of(page)]

# Runs in the page's interpreter: each block in turn, its stdout captured, its error as a traceback.
DRIVER = """
import contextlib, io, json, sys, traceback
blocks = json.loads(sys.stdin.read())
namespace = {"__name__": "__main__"}
results = []
for line, code in blocks:
    out = io.StringIO()
    error = None
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"{sys.argv[1]}:{line}", "exec"), namespace)
    except BaseException:
        error = traceback.format_exc()
    results.append({"stdout": out.getvalue(), "error": error})
sys.__stdout__.write("\\n@@RESULTS@@" + json.dumps(results))
"""


@functools.cache
def run_page(page: Path) -> dict[int, dict[str, str | None]]:
    """Run the page's unskipped blocks in order in one fresh interpreter: line -> stdout and error."""
    runnable = [(b.line, b.code) for b in ALL_BLOCKS if b.page == page and b.skip is None]
    env = {**os.environ, "AMPCORE_DEVICE": "cpu", "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory() as cwd:
        proc = subprocess.run(
            [sys.executable, "-c", DRIVER, str(page.relative_to(ROOT))],
            input=json.dumps(runnable),
            capture_output=True,
            text=True,
            cwd=cwd,
            env=env,
            timeout=600,
        )
    if "@@RESULTS@@" not in proc.stdout:
        raise AssertionError(f"{page.name}: the interpreter died (status {proc.returncode}):\n{proc.stderr[-3000:]}")
    results = json.loads(proc.stdout.rsplit("@@RESULTS@@", 1)[1])
    return {line: result for (line, _), result in zip(runnable, results)}


def _matches(expected: str, got: str) -> bool:
    def clean(s: str) -> str:
        return "\n".join(line.rstrip() for line in s.strip("\n").splitlines()) + "\n"

    return doctest.OutputChecker().check_output(clean(expected), clean(got), doctest.ELLIPSIS)


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=[b.id for b in ALL_BLOCKS])
def test_docs_python_block_runs_and_prints_what_the_page_shows(block: Block) -> None:
    if block.skip is not None:
        pytest.skip(f"{block.id}: {block.skip}")
    result = run_page(block.page)[block.line]
    assert result["error"] is None, f"{block.id} raised:\n{result['error']}"
    if block.output is not None:
        got = result["stdout"] or ""
        assert _matches(block.output, got), f"{block.id} printed:\n{got}\nthe page shows:\n{block.output}"


def test_the_convention_finds_blocks_skips_and_outputs(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nx = 1\n```\n\n<!-- output -->\n```text\n1\n```\n"
        "<!-- skip: needs a GPU -->\n```py\ncuda()\n```\n```console\n$ ls\n```\n"
    )
    first, second = blocks_of(page)
    assert (first.line, first.code, first.output, first.skip) == (1, "x = 1\n", "1\n", None)
    assert (second.line, second.skip, second.output) == (10, "needs a GPU", None)
    page.write_text("<!-- requires: no_such_module_xyz (pip install it) -->\n```python\nimport no_such_module_xyz\n```")
    (only,) = blocks_of(page)
    assert only.skip == "needs no_such_module_xyz, which is not installed (pip install it)"
    assert _matches("a ... c\n", "a bb c") and not _matches("a c", "a b c")


def test_every_page_with_python_has_blocks_found() -> None:
    for page in PAGES:
        fenced = len(re.findall(r"^```(?:python|py)\s*$", page.read_text(encoding="utf-8"), re.M))
        assert fenced == len(blocks_of(page)), page.name
