"""The house's rules, read from the code's own imports (issue: the house, second pass).

- the core (``dplace/`` but its shells ``cli``, ``study``, ``formats``) never imports the method packages
  (``formulations``, ``heuristics``, ``pipeline``, ``runtime``) at module level or inside functions; it reaches
  them only through the registry's ``load_methods`` (by name);
- no private name (``_x``) and no private module is imported from another package;
- no import circle between the top-level packages (the core, its shells, each method package);
- no import circle between the rooms of the core (``dplace/instance``, ``schedule``, ``verify``, ``bounds``,
  ``kernels``, and each top-level module such as ``registry``, ``plugins``, ``result``), counting imports
  inside functions too (only ``if TYPE_CHECKING:`` imports are left out: they never run);
- no import circle between the modules and subpackages of a method package (``formulations/cpsat``,
  ``formulations/milp``, ``formulations/frame.py`` ...), counted the same way;
- no import circle between any two modules, inside a room too (``dplace/instance``: io -> npz -> model ->
  columns -> records), counted the same way.
"""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
TOPS = {"dplace": "dplace", "formulations": "dplace.formulations", "heuristics": "dplace.heuristics",
        "pipeline": "dplace.pipeline", "runtime": "dplace.runtime"}
METHOD_PACKAGES = ("dplace.formulations", "dplace.heuristics", "dplace.pipeline", "dplace.runtime")
SHELLS = ("dplace.cli", "dplace.study", "dplace.formats")


def _modules():
    """(path, module name, its package) of every product module."""
    for top, dotted in TOPS.items():
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT / top).with_suffix("").parts
            parts = dotted.split(".") + list(rel)
            if parts[-1] == "__init__":
                yield path, ".".join(parts[:-1]), ".".join(parts[:-1])
            else:
                yield path, ".".join(parts), ".".join(parts[:-1])


def _package_of(module: str) -> str:
    """The package (folder) that holds ``module`` (a module, or a package itself)."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 and parts[1] in ("formulations", "heuristics", "pipeline", "runtime") else None
    base = ROOT / top if top else ROOT / "dplace"
    rel = parts[2:] if top else parts[1:]
    path = base.joinpath(*rel) if rel else base
    return module if path.is_dir() else ".".join(parts[:-1])


def _imports():
    """(path, line, importing package, imported module, names) for every import of a dplace module."""
    for path, module, package in _modules():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    if node.level > 1:
                        base = base[: -(node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target == "dplace" or target.startswith("dplace."):
                    yield path, node.lineno, package, target, [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("dplace."):
                        yield path, node.lineno, package, a.name, []


def _is_core(package: str) -> bool:
    return package.startswith("dplace") and not package.startswith(METHOD_PACKAGES) and not package.startswith(SHELLS)


def test_the_core_never_imports_a_method_package():
    bad = [f"{p.relative_to(ROOT)}:{line}: {target}" for p, line, pkg, target, _ in _imports()
           if _is_core(pkg) and target.startswith(METHOD_PACKAGES)]
    assert bad == []


def test_no_private_name_is_imported_from_another_package():
    bad = []
    for p, line, pkg, target, names in _imports():
        for name in names:
            full = f"{target}.{name}"
            owner = _package_of(full) if name != "*" else target
            if name.startswith("_") and not name.startswith("__") and _package_of(target) != pkg:
                bad.append(f"{p.relative_to(ROOT)}:{line}: {name} from {target}")
            elif any(part.startswith("_") and not part.startswith("__") for part in full.split(".")[1:-1]) \
                    and not pkg.startswith(_package_of(owner)):
                bad.append(f"{p.relative_to(ROOT)}:{line}: private module in {full}")
    assert bad == []


def _area(package: str) -> str:
    """The top-level package a package belongs to: the core, its shells, or one method package."""
    for top in METHOD_PACKAGES + SHELLS:
        if package == top or package.startswith(top + "."):
            return "shells" if top in SHELLS else top
    return "core"


def test_no_import_circle_between_packages():
    """Between the core, its shells and the method packages, imports go one way."""
    g = nx.DiGraph()
    for _p, _line, pkg, target, _names in _imports():
        a, b = _area(pkg), _area(_package_of(target))
        if a != b:
            g.add_edge(a, b)
    assert list(nx.simple_cycles(g)) == []


def _runtime_nodes(tree: ast.AST):
    """The nodes of ``tree`` outside ``if TYPE_CHECKING:`` blocks."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                todo.extend(child.orelse)
            else:
                todo.append(child)


def _room(module: str) -> str:
    """A core module's room: its subpackage of ``dplace`` (``dplace.schedule``), or the top-level module."""
    return ".".join(module.split(".")[:2])


def _method_room(module: str) -> str | None:
    """A method-package module's room: its subpackage or module right below the package
    (``dplace.formulations.cpsat``, ``dplace.formulations.frame``); None outside the method packages."""
    if module.startswith(tuple(p + "." for p in METHOD_PACKAGES)):
        return ".".join(module.split(".")[:3])
    return None


def _core_room(module: str) -> str | None:
    """A core module's room (:func:`_room`); None outside the core and for its shells."""
    if module == "dplace" or module.startswith("dplace.") and _is_core(module) and not module.startswith(SHELLS):
        return _room(module)
    return None


def _import_graph(sources, room_of) -> nx.DiGraph:
    """Edges room -> room for every import (inside functions too, not under ``if TYPE_CHECKING:``) between
    two rooms, ``at`` the first place each is made. ``sources``: (where, module, package, text) of every
    module; ``room_of(module)``: its room, or None to leave it out. ``from x import y`` counts as an import
    of the module ``x.y`` where that is a module, else of ``x``; ``from dplace import f`` of a name the package
    re-exports names no room (``dplace/__init__`` only re-exports the rooms)."""
    sources = list(sources)
    names = {module for _where, module, _package, _text in sources}
    g = nx.DiGraph()
    for where, module, package, text in sources:
        a = room_of(module)
        if a is None:
            continue
        for node in _runtime_nodes(ast.parse(text)):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")
                if node.level > 1:
                    base = base[: -(node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module or ""
                targets = [f"{target}.{x.name}" if f"{target}.{x.name}" in names else target for x in node.names]
            elif isinstance(node, ast.Import):
                targets = [x.name for x in node.names]
            else:
                continue
            for target in targets:
                b = room_of(target) if target != "dplace" else None
                if b is not None and b != a:
                    g.add_edge(a, b)
                    g[a][b].setdefault("at", []).append(f"{where}:{node.lineno}")
    return g


def _product_sources():
    for path, module, package in _modules():
        yield str(path.relative_to(ROOT)), module, package, path.read_text()


def _circles(g: nx.DiGraph) -> list[list[tuple[str, str, str]]]:
    """Every circle of ``g``, each edge with the first place it is made."""
    return [[(a, b, g[a][b]["at"][0]) for a, b in zip(c, c[1:] + c[:1])] for c in nx.simple_cycles(g)]


def test_no_import_circle_between_rooms_of_the_core():
    """Inside the core, imports between rooms go one way (the kernels below the schedule and the bounds,
    the table of methods below the rooms that look a method up)."""
    g = _import_graph(_product_sources(), _core_room)
    assert _circles(g) == []
    assert {("dplace.schedule", "dplace.kernels"), ("dplace.bounds", "dplace.kernels")} <= set(g.edges)


def test_no_import_circle_inside_the_method_packages():
    """Between the modules and subpackages of each method package (``formulations/cpsat`` as one room,
    ``formulations/frame.py`` another), imports go one way too: the MILP registers its cross check with
    the frame, the heuristic start and the placement searches' shared parts are modules of their own."""
    g = _import_graph(_product_sources(), _method_room)
    assert _circles(g) == []
    assert ("dplace.formulations.milp", "dplace.formulations.cpsat") in g.edges  # the graph is read at all


def _module(module: str) -> str | None:
    """Every product module is its own room."""
    return module if module.startswith("dplace.") else None


def test_no_import_circle_between_modules():
    """Inside a room, imports between its modules go one way too: the instance's records and columns below
    the model, the model below its file forms (the model does not know them: :func:`instance_to_dict`
    and :func:`instance_from_dict` in ``io`` do), the columnar ``npz`` below ``io``."""
    g = _import_graph(_product_sources(), _module)
    assert _circles(g) == []
    assert ("dplace.instance.io", "dplace.instance.npz") in g.edges  # the graph is read at all


def test_a_circle_made_inside_a_function_is_found():
    """The reader the two tests above rely on finds a circle closed by an import inside a function (a
    subpackage and a module of ``formulations``), and leaves out ``if TYPE_CHECKING:`` imports."""
    fake = [("a.py", "dplace.formulations.a", "dplace.formulations", "from .b import x\n"),
            ("b/__init__.py", "dplace.formulations.b", "dplace.formulations.b", ""),
            ("b/m.py", "dplace.formulations.b.m", "dplace.formulations.b",
             "def f():\n    from ..a import y\n    return y\n"),
            ("c.py", "dplace.formulations.c", "dplace.formulations",
             "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import z\n"),
            ("a2.py", "dplace.formulations.a2", "dplace.formulations", "from . import c\n")]
    g = _import_graph(fake, _method_room)
    assert _circles(g) == [[("dplace.formulations.a", "dplace.formulations.b", "a.py:1"),
                            ("dplace.formulations.b", "dplace.formulations.a", "b/m.py:2")]] \
        or _circles(g) == [[("dplace.formulations.b", "dplace.formulations.a", "b/m.py:2"),
                            ("dplace.formulations.a", "dplace.formulations.b", "a.py:1")]]
    assert ("dplace.formulations.c", "dplace.formulations.a") not in g.edges
    assert ("dplace.formulations.a2", "dplace.formulations.c") in g.edges
