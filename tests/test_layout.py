"""The package's shape: no import cycle, the compiler independent of the transformers integration.

The graph is read from the source (``import`` statements anywhere in a module, function
bodies included), so a lazy import that only hides a cycle counts as the cycle it is.
"""

import ast
import pathlib

import unbranch

SRC = pathlib.Path(unbranch.__file__).parent.parent
# the front doors put the compiler and the hf integration together: the package namespace
# (``unbranch.code_needing_rewriting``, and importing it registers the transformers catalogue)
# and the command line (whose validate/sweep/emit commands are hf tools)
FRONT_DOORS = {"unbranch", "unbranch.cli"}


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
    assert "unbranch.rewriting" in graph["unbranch.discovery"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
    assert find_cycle(import_graph()) is None


def test_compiler_never_imports_the_hf_integration():
    hf = [
        (name, sorted(e for e in edges if e == "unbranch.hf" or e.startswith("unbranch.hf.")))
        for name, edges in import_graph().items()
        if name not in FRONT_DOORS and not (name == "unbranch.hf" or name.startswith("unbranch.hf."))
    ]
    assert [(name, found) for name, found in hf if found] == []


def test_every_module_says_why_it_exists():
    missing = [name for name, (path, _) in _modules().items() if not ast.get_docstring(ast.parse(path.read_text()))]
    assert missing == []


def test_version_comes_from_the_package_metadata():
    from importlib.metadata import version

    assert unbranch.__version__ == version("unbranch")
