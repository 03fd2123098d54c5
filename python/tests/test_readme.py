"""The Python quick-start in README.md runs as written."""
import os
import re


def test_readme_quick_start_runs(readme, tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert blocks, "README.md has no python block"
    cwd = os.getcwd()
    os.chdir(os.path.join(os.path.dirname(__file__), "..", ".."))
    try:
        for code in blocks:
            exec(compile(code, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
