"""Front ends are thin adapters: they use what ``membot`` exports and nothing below it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import membot
from membot._moved import MOVED_MODULES

PACKAGE = Path(membot.__file__).parent
FRONT_ENDS = ("cli", "server")
# What a front end may import of membot's: the public API, what serving needs beyond it
# (keys, text messages), the benchmark harnesses (an API of their own), and the front ends
# themselves (`membot serve` starts the server).
ALLOWED = ("membot.service", "membot.eval", "membot.cli", "membot.server")


def _membot_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return [(line, name) for line, name in found if name.split(".")[0] == "membot"]


def _front_end_modules() -> list[Path]:
    return sorted(path for name in FRONT_ENDS for path in (PACKAGE / name).rglob("*.py"))


def test_the_front_ends_exist_as_packages():
    assert (PACKAGE / "cli" / "__init__.py").exists()
    assert not list(PACKAGE.glob("cli_*.py")), "the command line lives in the cli/ package"


def test_front_ends_import_only_the_public_api():
    wrong = []
    for path in _front_end_modules():
        for line, name in _membot_imports(path):
            if name != "membot" and not any(
                name == allowed or name.startswith(allowed + ".") for allowed in ALLOWED
            ):
                wrong.append(f"{path.relative_to(PACKAGE)}:{line} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_no_front_end_or_orchestration_reaches_into_the_store():
    modules = [*_front_end_modules(), PACKAGE / "turn" / "bot.py", PACKAGE / "turn" / "ending.py"]
    wrong = [
        f"{path.relative_to(PACKAGE)}: {text.strip()}"
        for path in modules
        for text in path.read_text(encoding="utf-8").splitlines()
        if ".store." in text or "membot.store" in text or ".store\n" in text + "\n"
    ]
    assert not wrong, "\n".join(wrong)


def test_the_check_catches_a_store_import(tmp_path):
    """The import check itself can fail: a module importing membot.store is reported."""
    module = tmp_path / "adapter.py"
    module.write_text("from membot.store import SqliteStore\nimport membot\n")
    assert _membot_imports(module) == [(1, "membot.store"), (2, "membot")]


def test_everything_exported_exists():
    missing = [name for name in membot.__all__ if not hasattr(membot, name)]
    assert not missing


def test_the_library_api_holds_no_server_only_names():
    import membot.service

    assert not set(membot.__all__) & set(membot.service.__all__)
    missing = [name for name in membot.service.__all__ if not hasattr(membot.service, name)]
    assert not missing


def test_a_name_that_left_the_library_api_still_imports_with_a_warning():
    import membot.service

    with pytest.warns(DeprecationWarning, match="from membot.service import create_key"):
        from membot import create_key
    assert create_key is membot.service.create_key


def test_an_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_thing"):
        _ = membot.no_such_thing


@pytest.mark.parametrize("old, new", sorted(MOVED_MODULES.items()))
def test_a_moved_module_imports_under_its_old_name_as_the_same_module(old, new):
    """Code written against 0.1's modules keeps working: the old name is the new module."""
    script = (
        "import importlib, warnings\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({new!r})\n"
        "assert old is new, (old, new)\n"
        f"assert new.__spec__.name == {new!r}\n"
        f"assert any({new!r} in str(w.message) for w in seen), [str(w.message) for w in seen]\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)


def test_every_moved_module_names_an_existing_module():
    missing = [
        new
        for new in MOVED_MODULES.values()
        if not (PACKAGE.parent / (new.replace(".", "/") + ".py")).exists()
    ]
    assert not missing
    stale = [
        old for old in MOVED_MODULES if (PACKAGE.parent / (old.replace(".", "/") + ".py")).exists()
    ]
    assert not stale
