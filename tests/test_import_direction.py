"""The direction of imports, read from the source with :mod:`ast` (docs/architecture.md).

Layers, top to bottom; a module may import its own layer and the layers below it:

    bot.cli, bot.__main__, bot.eval         the `threadwise` command
    bot.platforms                           transport: Slack, Discord, the console
    bot.runtime, bot.graph_worker           the wiring: builds the service for a process
    bot.interactions                        what a click, a form or a command does
    bot.service, bot.admin                  ChatService (the face) and its parts
    bot.chat                                leaf helpers every platform shares
    bot.protocol, bot.config, bot.storage,  contracts, settings, storage, logs, metrics
    the other bot.* modules
    graphs                                  the brain: no chat-platform code

Also: no import loops in bot/ or graphs/ (imports under ``if TYPE_CHECKING:`` do not run and
are left out of the loop check only); no module of bot.service imports ChatService back, not
even for types; platforms import the service only through its face (``bot.service``), never a
graph module.

Known violations are listed in :data:`ALLOWED`, each with the reason it is still there. The
list must only shrink: an entry that no longer occurs fails the test, so it is removed when
the code is fixed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "graphs")

#: (prefix, layer): the longest matching prefix wins; other bot.* modules are layer 1.
LAYERS = (
    ("graphs", 0),
    ("bot", 1),
    ("bot.chat", 2),
    ("bot.service", 3),
    ("bot.admin", 3),  # the admin commands: a part of the service
    ("bot.interactions", 4),
    ("bot.runtime", 5),
    ("bot.graph_worker", 5),
    ("bot.platforms", 6),
    ("bot.eval", 7),
    ("bot.cli", 7),
    ("bot.__main__", 7),
)

#: Known violations, (importer, imported) -> why it is still there. This list must only
#: shrink (it is empty now); nothing may be added to it.
ALLOWED: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    type_only: bool  # under `if TYPE_CHECKING:`
    names: tuple[str, ...]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The module of ours that ``import name`` loads last (``name`` itself or its package)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports_of(module: str, path: Path) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, type_only: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, type_only)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name)
                if target:
                    found.append(Import(module, target, node.lineno, type_only, ()))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*parent, base] if base else parent)
            for alias in node.names:
                target = _resolve(f"{base}.{alias.name}") if f"{base}.{alias.name}" in MODULES else _resolve(base)
                if target:
                    found.append(Import(module, target, node.lineno, type_only, (alias.name,)))
        for child in ast.iter_child_nodes(node):
            visit(child, type_only)

    visit(tree, False)
    return found


IMPORTS = [imp for module, path in MODULES.items() for imp in _imports_of(module, path)]


def layer(module: str) -> int:
    best = max((prefix for prefix, _ in LAYERS if module == prefix or module.startswith(prefix + ".")), key=len)
    return dict(LAYERS)[best]


def _violations() -> dict[tuple[str, str], str]:
    """Every broken rule as (importer, imported) -> "rule at file:line"."""
    found: dict[tuple[str, str], str] = {}

    def add(imp: Import, rule: str) -> None:
        found.setdefault((imp.importer, imp.imported), f"{rule} ({MODULES[imp.importer].relative_to(ROOT)}:{imp.line})")

    chat_service = next(
        (m for m, p in MODULES.items() if m.startswith("bot.service") and "class ChatService" in p.read_text()), None
    )
    for imp in IMPORTS:
        if imp.importer == imp.imported:
            continue
        if layer(imp.imported) > layer(imp.importer):
            add(imp, f"imports upward (layer {layer(imp.importer)} -> {layer(imp.imported)})")
        if imp.importer.startswith("bot.service.") and imp.importer != chat_service:
            if imp.imported == chat_service or (imp.imported == "bot.service" and "ChatService" in imp.names):
                add(imp, "a part of the service imports ChatService back")
        if imp.importer.startswith("bot.platforms."):
            if imp.imported.startswith("bot.service."):
                add(imp, "a platform reaches a service internal (use the face, bot.service)")
            if imp.imported.startswith("graphs"):
                add(imp, "a platform imports the graph")
    return found


def _cycles() -> list[list[str]]:
    """Import loops among run-time imports (Tarjan's strongly connected components)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in IMPORTS:
        if not imp.type_only and imp.importer != imp.imported:
            graph[imp.importer].add(imp.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    loops: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                loops.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return loops


def test_the_checker_sees_every_kind_of_import():
    """The reader itself: relative, aliased, lazy and TYPE_CHECKING imports are all found."""
    kinds = {(imp.type_only, imp.line > 0) for imp in IMPORTS}
    assert (True, True) in kinds and (False, True) in kinds
    assert layer("graphs.models") == 0 and layer("bot.chat.text") == 2 and layer("bot.platforms.slack.app") == 6
    assert layer("bot.config") == 1 and layer("bot.cli.run") == 7


def test_imports_flow_one_way():
    found = _violations()
    new = {edge: why for edge, why in found.items() if edge not in ALLOWED}
    assert not new, "imports against the layer order (docs/architecture.md):\n" + "\n".join(
        f"  {a} -> {b}: {why}" for (a, b), why in sorted(new.items())
    )


def test_the_allow_list_only_shrinks():
    gone = sorted(edge for edge in ALLOWED if edge not in _violations())
    assert not gone, f"fixed, remove from ALLOWED: {gone}"


def test_no_import_loops():
    loops = _cycles()
    allowed = {frozenset(loop) for loop in ALLOWED_LOOPS}
    new = [loop for loop in loops if frozenset(loop) not in allowed]
    assert not new, "import loops:\n" + "\n".join("  " + " <-> ".join(loop) for loop in new)
    gone = [loop for loop in ALLOWED_LOOPS if frozenset(loop) not in {frozenset(x) for x in loops}]
    assert not gone, f"fixed, remove from ALLOWED_LOOPS: {gone}"


#: Known import loops (the modules of one strongly connected component). Must stay empty,
#: like :data:`ALLOWED`.
ALLOWED_LOOPS: list[list[str]] = []
