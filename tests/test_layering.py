"""The house rules of the package, read from the source (docs/internals.md, "Layers"):

- every module sits on a floor, and imports only go down (or stay on its floor);
- no circle of imports spans two top-level packages;
- a private name (``_x``, or anything in a ``_x`` module) stays inside its top-level package;
- no file passes 800 lines.

Imports are read with ``ast`` from every ``workbench`` module, including the ones inside
functions and under ``TYPE_CHECKING`` (a lazy import is still a dependency), and
``importlib.import_module("workbench....")`` calls with a literal name.
"""
from __future__ import annotations

import ast
import pathlib
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "workbench"
MAX_LINES = 800

# Top-level package (or module) -> floor. Keep in step with docs/internals.md "Layers".
FLOORS = {
    "options": 0,
    "ir": 1, "runtime": 1, "workers": 1,
    "nd": 1,            # TVM's alias module for runtime.ndarray / runtime.device
    "transform": 1, "instrument": 1,  # TVM's tvm.transform / tvm.instrument (ir's passes)
    "contrib": 1,       # TVM's contrib.utils (tempdir): standard library only
    "tir": 2, "te": 2,
    "dlight": 3, "codegen": 3, "target": 3,
    "testing": 3,       # TVM's tvm.testing: markers read the host target
    "rpc": 4, "relax": 4, "topi": 4,
    "script": 4,        # TVMScript parser: above relax and tir, below the tuner
    "meta_schedule": 5,
    "s_tir": 5,         # TVM's newer names for schedule / meta_schedule / dlight (aliases)
    "driver": 6,
    "widgets": 7, "cli": 7, "demo": 7,
    "labextension": 7,  # JupyterLab's static files for the widgets; no Python
}
# ``workbench/__init__.py`` itself is above every floor: it gathers the public API and wires
# late bindings (the dashboard loaders). Python imports it before any module of the package,
# so a module naming it (``workbench.__version__``) adds no dependency: such imports are not
# edges.

# Imports of a higher floor that are part of the design: (importer, imported) -> why.
ALLOWED_UP = {
    ("workbench.tir.build_entry", "workbench.codegen.build"):
        "TVM's name tir.build: the compiler is imported when tir.build is called, so "
        "importing tir does not import LLVM",
    ("workbench.relax.transform", "workbench.meta_schedule.relax_passes"):
        "TVM's name relax.transform.MetaScheduleApplyDatabase, re-exported from the tuner on "
        "first use (module __getattr__), so importing relax does not import the tuner",
}

# Imports of a higher floor tolerated while a refactoring is under way (none now: the
# compute_inline -> te.regions entry went when the analysis floor merged).
TEMPORARY_ALLOWED: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Edge:
    importer: str   # dotted module name
    imported: str   # dotted module name (the module the names come from)
    name: str | None  # the name imported from it (``from m import name``), else None
    line: int

    @property
    def where(self) -> str:
        return f"{self.importer}:{self.line} imports {self.imported}" + (
            f".{self.name}" if self.name else "")


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def top_package(module: str) -> str:
    """``workbench.tir.expr`` -> ``tir``; the root package -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imports(path: pathlib.Path) -> list[Edge]:
    me = module_name(path)
    is_package = path.name == "__init__.py"
    here = me.split(".") if is_package else me.split(".")[:-1]
    edges: list[Edge] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            edges += [Edge(me, a.name, None, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for a in node.names:
                # ``from workbench import tir`` / ``from . import x``: the name may be a module.
                sub = f"{source}.{a.name}"
                if (PACKAGE.parent / (sub.replace(".", "/") + ".py")).exists() or \
                        (PACKAGE.parent / sub.replace(".", "/")).is_dir():
                    edges.append(Edge(me, sub, None, node.lineno))
                else:
                    edges.append(Edge(me, source, a.name, node.lineno))
        elif isinstance(node, ast.Call) and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__"):
                edges.append(Edge(me, node.args[0].value, None, node.lineno))
    return [e for e in edges if e.imported.split(".")[0] == "workbench"]


def _sources() -> list[pathlib.Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _edges() -> list[Edge]:
    return [e for p in _sources() for e in _imports(p)]


def _cross_package(edges: list[Edge]) -> list[Edge]:
    """Edges between two top-level packages (the root package, above all, is neither)."""
    return [e for e in edges if top_package(e.importer) != ""
            and top_package(e.imported) not in ("", top_package(e.importer))]


def test_every_package_has_a_floor():
    entries = {p.stem for p in PACKAGE.iterdir()
               if p.name not in ("__init__.py", "__pycache__") and
               (p.is_dir() or p.suffix == ".py")}
    assert sorted(entries - FLOORS.keys()) == [], "place these in FLOORS and docs/internals.md"
    assert sorted(FLOORS.keys() - entries) == [], "FLOORS names packages that do not exist"


def test_imports_only_go_down():
    allowed = ALLOWED_UP.keys() | TEMPORARY_ALLOWED.keys()
    bad = [e.where + f" (floor {FLOORS[top_package(e.importer)]} -> "
           f"{FLOORS[top_package(e.imported)]})"
           for e in _cross_package(_edges())
           if FLOORS[top_package(e.imported)] > FLOORS[top_package(e.importer)]
           and (e.importer, e.imported) not in allowed]
    assert bad == [], "imports of a higher floor:\n" + "\n".join(bad)


def test_allow_lists_are_still_needed():
    present = {(e.importer, e.imported) for e in _edges()}
    stale = sorted((ALLOWED_UP.keys() | TEMPORARY_ALLOWED.keys()) - present)
    assert stale == [], f"allowed imports that no longer exist (remove them): {stale}"


def package_cycles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected sets of two or more top-level packages (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(top_package(e.importer), set()).add(top_package(e.imported))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_circle_spans_two_packages():
    allowed = ALLOWED_UP.keys() | TEMPORARY_ALLOWED.keys()
    edges = [e for e in _cross_package(_edges()) if (e.importer, e.imported) not in allowed]
    cycles = package_cycles(edges)
    detail = [f"{c}: " + "; ".join(e.where for e in edges
                                   if {top_package(e.importer), top_package(e.imported)} <= set(c))
              for c in cycles]
    assert cycles == [], "import circles between packages:\n" + "\n".join(detail)


def test_cycle_finder_finds_a_circle():
    def edge(a: str, b: str) -> Edge:
        return Edge(f"workbench.{a}.m", f"workbench.{b}.m", None, 1)
    assert package_cycles([edge("a", "b"), edge("b", "c"), edge("c", "a"), edge("c", "d")]) \
        == [["a", "b", "c"]]


def _is_private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def test_private_names_stay_in_their_package():
    bad = [e.where for e in _cross_package(_edges())
           if (e.name is not None and _is_private(e.name))
           or any(_is_private(part) for part in e.imported.split(".")[2:])]
    assert bad == [], "private names imported from another package:\n" + "\n".join(bad)


def test_no_file_passes_the_line_budget():
    long = {str(p.relative_to(ROOT)): n for p in _sources()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}, f"files over {MAX_LINES} lines (split them by family): {long}"


def test_the_docs_name_every_floor():
    text = (ROOT / "docs" / "internals.md").read_text()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    missing = [name for name in FLOORS if f"workbench/{name}" not in section]
    assert missing == [], f"docs/internals.md 'Layers' does not place {missing}"


def test_importing_workbench_loads_neither_the_tuner_nor_the_widgets():
    """The lazy re-export and the dashboard loaders keep the upper floors unloaded."""
    import subprocess
    import sys
    script = ("import sys, workbench, workbench.relax.transform; "
              "print(sorted(m for m in sys.modules if m.startswith(('workbench.meta_schedule', "
              "'workbench.widgets'))))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
