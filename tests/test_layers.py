"""The package's layers, read from its source: what recall, the index and the stores may
import, and no circle of imports through ``Memory``. Every import counts, those under
``TYPE_CHECKING`` and inside functions too: a type-level circle is still a circle for whoever
changes one of its modules."""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

import membot

PACKAGE = Path(membot.__file__).parent
# Below memory/ and turn/: what they build on may not reach back into them.
LOWER = ("membot.recall", "membot.index", "membot.store")
UPPER = ("membot.memory", "membot.turn")
FACADE = "membot.memory.facade"


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if path.name == "__init__.py" else parts)
        found[name] = path
    return found


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The dotted names an import statement names (``from a import b``: ``a.b`` and ``a``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    return [f"{base}.{alias.name}" for alias in node.names] + [base]


def import_graph() -> dict[str, set[str]]:
    """Each module of membot and the modules of membot it imports."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = _imported(node, name, path.name == "__init__.py")
            if isinstance(node, ast.ImportFrom) and any(each in modules for each in names[:-1]):
                names = names[:-1]  # ``from a import b`` of a module b: not a itself
            for each in names:
                while each and each not in modules:  # a name in a module: that module
                    each = each.rpartition(".")[0]
                if each and each != name:
                    graph[name].add(each)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """The graph's strongly connected components (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components


def a_cycle(graph: dict[str, set[str]], start: str, within: set[str]) -> list[str]:
    """The shortest circle of imports from ``start`` back to it, inside ``within``."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for target in sorted(graph[node] & within):
            if target == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if target not in came_from:
                came_from[target] = node
                queue.append(target)
    return []


def _in(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


def test_recall_index_and_store_import_nothing_of_memory_or_turn() -> None:
    graph = import_graph()
    wrong = [
        f"{module} imports {target}"
        for module, targets in sorted(graph.items())
        if _in(module, LOWER)
        for target in sorted(targets)
        if _in(target, UPPER)
    ]
    assert not wrong, "\n".join(wrong)


def test_no_circle_of_imports_runs_through_memory() -> None:
    graph = import_graph()
    (component,) = [each for each in strongly_connected(graph) if FACADE in each]
    assert component == {FACADE}, (
        f"{len(component)} modules import one another through {FACADE}; one circle: "
        + " -> ".join(a_cycle(graph, FACADE, component))
    )


def test_the_package_imports_without_a_circle() -> None:
    graph = import_graph()
    circles = [
        " -> ".join(a_cycle(graph, min(component), component))
        for component in strongly_connected(graph)
        if len(component) > 1
    ]
    assert not circles, "\n".join(circles)


def test_the_check_sees_a_type_level_circle(tmp_path: Path) -> None:
    """The checks can fail: an import under TYPE_CHECKING is an edge, and a circle of two is
    found and printed."""
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from membot.a import A\n"
    tree = ast.parse(source)
    names = [name for node in ast.walk(tree) for name in _imported(node, "membot.b", False)]
    assert "membot.a.A" in names
    graph = {"membot.a": {"membot.b"}, "membot.b": {"membot.a"}, "membot.c": {"membot.a"}}
    components = strongly_connected(graph)
    assert {"membot.a", "membot.b"} in components and {"membot.c"} in components
    assert a_cycle(graph, "membot.a", {"membot.a", "membot.b"}) == [
        "membot.a",
        "membot.b",
        "membot.a",
    ]
