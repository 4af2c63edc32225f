"""Every code block of the README runs as written, so the README cannot drift from the code:

* each ```python block is saved to a file and run with ``python FILE`` against real services (the
  lake holds ``kafka_test.customers``; Kafka is the test broker), with nothing added;
* each ```sh line is checked: a ``changelake`` command parses with the CLI's own parser (sub-
  command, options, choices) and the files it names exist; a ``make`` line is a real target and
  dry-runs (``make -n``) with the variables given. The commands themselves run in the tests of
  their features (``changelake check --pipeline …kafka-to-paimon.yaml`` in test_cli_check.py,
  ``pipeline run`` in test_cli_runs.py, ``changelog`` in tests/integration/test_changelog_command.py).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"


def blocks(lang: str) -> list[tuple[int, str]]:
    """(line number, code) of every fenced block of ``lang`` in the README."""
    text = README.read_text()
    out = []
    for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
        if m.group(1) == lang:
            out.append((text[: m.start()].count("\n") + 1, m.group(2)))
    return out


def shell_commands(code: str) -> list[list[str]]:
    """The commands of a shell block: continuation lines joined, comments dropped, and the
    command inside ``eval "$(…)"`` taken out."""
    commands = []
    for line in code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "eval":
            inner = re.search(r"\$\((.*)\)", words[1])
            assert inner, line
            words = shlex.split(inner.group(1))
        commands.append(words)
    return commands


def test_the_readme_has_the_blocks_this_test_knows():
    assert len(blocks("python")) >= 2 and len(blocks("sh")) >= 6


@pytest.mark.parametrize(("line", "code"), blocks("sh"), ids=lambda v: str(v) if isinstance(v, int) else "")
def test_every_shell_line_is_a_real_command(line, code):
    from cli.main import _build_parser

    makefile = (REPO_ROOT / "Makefile").read_text()
    for words in shell_commands(code):
        program = Path(words[0]).name
        if program == "changelake":
            try:
                _build_parser().parse_args(words[1:])
            except SystemExit as exc:  # argparse refused it
                raise AssertionError(f"README line {line}: {' '.join(words)!r} does not parse") from exc
            for word in words[1:]:
                value = word.split("=", 1)[-1]
                if re.search(r"\.(ya?ml|py)$", value) and "/" in value:
                    assert (REPO_ROOT / value).is_file(), f"README line {line}: {value} does not exist"
        elif program == "make":
            target = next(w for w in words[1:] if "=" not in w)
            assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"no make target {target}"
            variables = [w for w in words[1:] if "=" in w]
            dry = subprocess.run(["make", "-n", "-C", str(REPO_ROOT), target, *variables], capture_output=True,
                                 text=True, timeout=60)
            assert dry.returncode == 0, dry.stderr
            if target == "dev" and variables:
                for v in variables:
                    key, value = v.split("=", 1)
                    assert f"--{key.lower()} {value}" in dry.stdout, dry.stdout
        else:
            raise AssertionError(f"README line {line}: unknown program {words[0]!r} (teach this test about it)")


@pytest.mark.integration
@pytest.mark.parametrize(("line", "code"), blocks("python"), ids=lambda v: str(v) if isinstance(v, int) else "")
def test_every_python_block_runs_as_written(line, code, tmp_path, kafka_bootstrap):
    from test_query_the_lake import _lake

    env = {**os.environ, **_lake(tmp_path), "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "PYTHONPATH": str(REPO_ROOT),
           "PYTHONWARNINGS": "ignore"}
    script = tmp_path / f"readme_line_{line}.py"
    script.write_text(code)
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, f"README line {line}:\n{result.stderr[-3000:]}"
    assert result.stdout.strip(), "every block prints what it did"
