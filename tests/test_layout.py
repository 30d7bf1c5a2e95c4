"""The package's shape: no import cycle, parts that import only downwards, the root only the public face.

The graph is read from the source (``import`` statements anywhere in a module, function
bodies included), so a lazy import that only hides a cycle counts as the cycle it is.
"""

import ast
import pathlib

import unbranch

SRC = pathlib.Path(unbranch.__file__).parent.parent


def _modules() -> dict[str, tuple[pathlib.Path, bool]]:
    """Dotted name -> (file, is a package's __init__) for every module of the package."""
    out = {}
    for path in sorted((SRC / "unbranch").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (``from pkg import sub`` names the submodule)."""
    modules = _modules()
    graph = {}
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name.split(".")[0] == "unbranch"}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.split(".")[0] == "unbranch":
                    edges |= {f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target for a in node.names}
        graph[name] = edges - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first == last), or None."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" once fully explored
    path: list[str] = []

    def visit(name):
        state[name] = "open"
        path.append(name)
        for nxt in sorted(graph.get(name, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[name] = "done"
        return None

    for name in sorted(graph):
        if name not in state:
            found = visit(name)
            if found:
                return found
    return None


def test_graph_reader_sees_function_level_imports_and_cycles():
    graph = import_graph()
    assert "unbranch.runtime.source_map" in graph["unbranch.runtime._tracing"]  # imported inside a function
    assert "unbranch.load.rewriting" in graph["unbranch.exporting.discovery"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
    assert find_cycle(import_graph()) is None


# the package's parts, lowest first: a module imports its own part and the parts below it, never one
# beside or above it (the root holds only the public face; the integration sits above what it uses)
PARTS = [
    ("unbranch.errors", "unbranch.version"),
    ("unbranch.runtime",),  # what rewritten code calls
    ("unbranch.compiler",),  # a function's source in, its rewritten source out
    ("unbranch.load",),  # the rewritten code into the running program
    ("unbranch.exporting",),  # the export session
    ("unbranch.api",),
    ("unbranch.onnx",),
    ("unbranch.hf",),  # the transformers integration
    ("unbranch.cli", "unbranch"),  # the front doors put the rest together
    ("unbranch.__main__",),
]
# inside the compiler, lowest first: libcst's private parts, facts and walks, where each statement
# comes from, then the plumbing passes share, then the lowering helpers, the canonical forms, the
# rules, and the pipeline that lists them
COMPILER = [
    ("libcst_internals",),
    ("analysis", "source"),
    ("origins",),
    ("context",),
    ("passes", "emit", "verbatim", "callees"),
    ("lower",),
    ("normalise",),
    ("rules",),
    ("pipeline",),
]


def _rank(name: str, parts) -> tuple[int, str] | None:
    """(level, part) of a module: the longest part that is it or holds it."""
    found = [
        (len(part), level, part)
        for level, names in enumerate(parts)
        for part in names
        if name == part or name.startswith(part + ".")
    ]
    return max(found)[1:] if found else None


def _upward(graph, parts, inside: str = "") -> list[tuple[str, str]]:
    def rank(name):
        return _rank(name[len(inside) :] if inside else name, parts)

    wrong = []
    for name, edges in graph.items():
        if inside and not name.startswith(inside):
            continue
        mine = rank(name)
        for edge in edges:
            if inside and not edge.startswith(inside):
                continue
            theirs = rank(edge)
            if mine is None or theirs is None:
                wrong.append((name, edge))  # a module no part holds
            elif theirs[1] != mine[1] and theirs[0] >= mine[0]:
                wrong.append((name, edge))
    return sorted(wrong)


def test_every_import_runs_down_the_parts():
    assert _upward(import_graph(), PARTS) == []


def test_the_compiler_reads_as_its_pipeline():
    assert _upward(import_graph(), COMPILER, inside="unbranch.compiler.") == []


def test_the_root_holds_only_the_public_face():
    root = {name for name in _modules() if name.count(".") == 1 or name == "unbranch"}
    packages = {name for name, (_, is_package) in _modules().items() if is_package and name.count(".") == 1}
    assert root - packages == {
        "unbranch",
        "unbranch.__main__",
        "unbranch.api",
        "unbranch.cli",
        "unbranch.errors",
        "unbranch.onnx",
        "unbranch.version",
    }
    assert packages == {"unbranch.compiler", "unbranch.load", "unbranch.exporting", "unbranch.runtime", "unbranch.hf"}


def test_the_layout_check_finds_what_runs_up():
    graph = {"unbranch.runtime.loops": {"unbranch.compiler.pipeline"}, "unbranch.api": {"unbranch.load.swap"}}
    assert _upward(graph, PARTS) == [("unbranch.runtime.loops", "unbranch.compiler.pipeline")]
    graph = {"unbranch.compiler.normalise.x": {"unbranch.compiler.rules._checks", "unbranch.compiler.passes"}}
    assert _upward(graph, COMPILER, inside="unbranch.compiler.") == [
        ("unbranch.compiler.normalise.x", "unbranch.compiler.rules._checks")
    ]
    assert _upward({"unbranch.api": {"unbranch.onnx"}}, PARTS) == [("unbranch.api", "unbranch.onnx")]


def test_every_module_says_why_it_exists():
    missing = [name for name, (path, _) in _modules().items() if not ast.get_docstring(ast.parse(path.read_text()))]
    assert missing == []


def test_version_comes_from_the_package_metadata():
    from importlib.metadata import version

    assert unbranch.__version__ == version("unbranch")


def test_no_file_of_the_package_is_taken_for_the_users():
    """Errors point at the user's frame: a frame in any part of unbranch is never one."""
    from unbranch.exporting.failures import is_user_file

    assert [name for name, (path, _) in _modules().items() if is_user_file(str(path))] == []


def test_only_one_module_reaches_into_libcst_internals():
    """libcst's private names (``libcst._nodes...``) are imported by compiler/libcst_internals.py alone,
    so a libcst release that moves them breaks one module, which pyproject bounds libcst for."""
    reaching = set()
    for name, (path, _) in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            imported = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            imported += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if any(m.startswith("libcst._") for m in imported):
                reaching.add(name)
    assert reaching == {"unbranch.compiler.libcst_internals"}
