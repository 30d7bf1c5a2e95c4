"""What a rewrite did, told to people: a context's Report, the branches eager runs take, verbose output, dumps."""

from __future__ import annotations

import contextlib
import os
import re
import weakref
from dataclasses import dataclass, field

import torch

from ..load.rewriting import RewrittenMethod
from ..runtime import control_flow, source_map


def branch_nodes(ep) -> list:
    """The node each converted if became in an exported program, nested subgraphs included: its
    ``cond``, or the first ``torch.where`` of an if whose cheap sides both ran (control_flow._selected)."""
    found = []
    for gm in ep.graph_module.modules():
        if not isinstance(gm, torch.fx.GraphModule):
            continue
        previous = ""  # (the wheres of one if, one per output, come one after another)
        for node in gm.graph.nodes:
            trace = node.meta.get("stack_trace") or ""
            selected = node.target is torch.ops.aten.where.self and _IF_STMT in trace.rstrip().rsplit("\n", 1)[-1]
            if node.target is torch.ops.higher_order.cond or (selected and trace != previous):
                found.append(node)
            previous = trace if selected else ""
    return found


_IF_STMT = ".if_stmt("  # (the emitted line, last in the node's stack trace)
_SITE = re.compile(r"# (\S+:\d+)\s*$", re.M)


def branch_sites(ep) -> set[str]:
    """``file:line`` of the user's if behind each branch node of ``ep``."""
    return {site for node in branch_nodes(ep) if (site := site_of(node))}


def site_of(node) -> str | None:
    """``file:line`` of the user's statement a node of rewritten code comes from (the emitted line's
    comment, in its stack trace)."""
    sites = _SITE.findall(node.meta.get("stack_trace") or "")
    return sites[-1] if sites else None


@dataclass
class Report:
    """What a torch_export_rewrite context rewrote."""

    rewritten: list = field(default_factory=list)
    skipped: list = field(default_factory=list)  # (qualname, reason) a model needed but could not get
    unchanged: list = field(default_factory=list)  # RewrittenMethod of each named function with nothing to convert
    attempts: list = field(default_factory=list)  # guided.Attempt of each export torch made (unbranch.export)
    hooks: dict = field(default_factory=dict)  # function -> the libcst hooks it was rewritten with
    fallback: str = ""  # why the export of the rewritten code failed, when the plain program was returned

    def __iter__(self):
        return iter(self.rewritten)

    def __len__(self):
        return len(self.rewritten)

    def conds(self, ep) -> dict[str, int]:
        """How many branch nodes (a cond, or an if's where) of exported program ``ep`` each rewritten function produced.

        Read from the nodes' stack traces, which name the rewritten code's file; a method
        whose count is 0 changed nothing in the graph.
        """
        counts = {rm.qualname: 0 for rm in self.rewritten}
        files = {rm.code_object.co_filename: rm.qualname for rm in self.rewritten}
        for node in branch_nodes(ep):
            trace = node.meta.get("stack_trace") or ""
            for filename, qualname in files.items():
                if f'"{filename}"' in trace:
                    counts[qualname] += 1
        return counts

    def applied(self):
        """A context running the rewritten functions in place of the originals (eager runs see each side taken)."""
        from ..load.swap import swapped_in

        return swapped_in(self.rewritten)

    @property
    def left(self) -> list[tuple[str, int, str]]:
        """(file, line, reason) of every construct left as plain Python in a rewritten function."""
        return [(rm.source.path, n.line, n.detail) for rm in self.rewritten for n in rm.notes if n.kind == "left"]

    def __str__(self):
        lines = [f"{len(self.rewritten)} function(s) rewritten"]
        for rm in self.rewritten:
            kinds = [n.kind for n in rm.notes if n.kind != "left"]
            done = ", ".join(f"{kinds.count(k)} {k}" for k in dict.fromkeys(kinds)) or "nothing converted"
            lines.append(f"  {rm.qualname} ({rm.source.path}:{rm.source.line}): {done}")
        lines += [f"  left as Python at {path}:{line}: {why}" for path, line, why in self.left]
        lines += [f"  skipped {name}: {why}" for name, why in self.skipped]
        for n, attempt in enumerate(self.attempts, 1):
            outcome = f"stopped: {attempt.error}" if attempt.error else "exported"
            if attempt.narrowed:
                outcome += f", narrower than its dynamic dimensions ({'; '.join(attempt.narrowed[:3])})"
            if attempt.returned and n < len(self.attempts):
                outcome += ": its program is the one returned"
            lines.append(f"  export {n}: {outcome}")
            lines += [f"    at {s.where} in {s.name}(): {attempt.why.get(s.where, 'rewritten')}" for s in attempt.sites]
            if attempt.speculative:
                guessed = ", ".join(attempt.speculative)
                lines.append(f"    rewritten speculatively (a branch on data, torch named none): {guessed}")
            if attempt.dropped:
                dropped = ", ".join(attempt.dropped)
                lines.append(f"    speculative rewrites dropped, the export with them failed: {dropped}")
        if self.fallback:
            lines.append(f"  the plain program was returned; the export of rewritten code failed: {self.fallback}")
        return "\n".join(lines)


# exported program -> the Report of the unbranch.export that made it
_REPORTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def report_of(ep) -> Report | None:
    """What ``unbranch.export`` did to make ``ep``: each export it tried, and what it rewrote."""
    return _REPORTS.get(ep)


def remember(ep, report: Report) -> None:
    _REPORTS[ep] = report


@contextlib.contextmanager
def observe_branches():
    """Record which side of each dispatched ``if`` eager runs take: ``{"file:line": {True, False}}``."""
    seen: dict[str, set] = {}

    def record(filename, line, taken):
        seen.setdefault(source_map.describe(filename, line), set()).add(taken)

    control_flow.observers.append(record)
    try:
        yield seen
    finally:
        control_flow.observers.remove(record)


def say(verbose: int, rm: RewrittenMethod) -> None:
    """``verbose=1``: one line per rewritten function; ``2``: its diff too."""
    if verbose and rm.changed:
        print(f"[unbranch] rewrote {rm.qualname} ({rm.source.path}:{rm.source.line})")
        if verbose > 1:
            print(rm.diff())


def dump(directory: str, rm: RewrittenMethod) -> None:
    """Write the original, the rewritten source and their diff under ``directory``."""
    os.makedirs(directory, exist_ok=True)
    base = os.path.join(directory, rm.qualname.replace("<locals>", "locals"))
    for suffix, text in ((".original.py", rm.original_code), (".rewritten.py", rm.code), (".diff", rm.diff())):
        with open(base + suffix, "w") as f:
            f.write(text)
