"""The README's front door: it opens with the two make commands, and its Python quick start runs."""

import ast
import contextlib
import io
import re
from pathlib import Path

README = (Path(__file__).parents[1] / "README.md").read_text()


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def test_readme_opens_with_the_two_commands():
    first_block = code_blocks("bash")[0]
    commands = [line.split("#")[0].strip() for line in first_block.splitlines()]
    assert commands == ["make demo", "make test"]
    assert README.index("make demo") < README.index("```python")


def test_quick_start_is_five_statements_and_names_what_it_prints():
    quick_start = code_blocks("python")[0]
    assert len(ast.parse(quick_start).body) == 5
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(quick_start, "README quick start", "exec"), {})
    answer = printed.getvalue()
    assert "1. image 36 (digit 0)" in answer and "pixel_2_6" in answer  # named items and features
    assert "item_" not in answer and "feature_" not in answer
