"""Export guided by torch's own failures: rewrite exactly the functions torch names, and try again.

An attempt is one export with everything rewritten so far swapped in. When it stops at
Python control flow on data (:mod:`failures`), the user's frame torch names is looked up
(:mod:`locate`: a method of any class, a module function of any package, a nested function),
that function is rewritten and swapped in, and the export runs again; until it exports, or
an attempt names nothing new that unbranch can rewrite, which ends in one UnbranchError
listing every place and why it could not be converted, torch's error chained.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import os
import sys
import types
import warnings
from dataclasses import dataclass, field

import torch

from ..compiler.normalise.call_rest import RETURNS_CALL
from ..compiler.source import get_source, innermost_function
from ..errors import UnbranchError
from ..load.rewriting import RewrittenMethod, options_for, rewrite
from ..load.swap import original_code, swapped_in
from ..runtime import source_map
from ..runtime.continuation import variants
from ..runtime.control_flow import gave_numbers, rejection, torch_limit, unmerged
from ..runtime.settings import applied
from .failures import (
    GENERATED,
    GuardLog,
    Site,
    Swallowed,
    caller_of,
    kind_of,
    narrowed_by,
    narrowing,
    place,
    runtime_failure,
    sites,
    untraced_side,
)
from .locate import Nested, code_at, function_for
from .quiet import quiet

MAX_ATTEMPTS = 16  # an export that needs more functions rewritten than this is not converging


@dataclass
class Attempt:
    """One export: what it stopped at (nothing when it exported) and what was rewritten because of it."""

    error: str = ""  # ``Class: first line`` of torch's error, "" when it exported
    sites: list = field(default_factory=list)  # [Site]
    rewritten: list = field(default_factory=list)  # qualnames rewritten after it, for the next attempt
    why: dict = field(default_factory=dict)  # site.where -> why unbranch could not act on it
    log: str = ""  # what torch printed meanwhile
    narrowed: list = field(default_factory=list)  # what its program accepts less of than asked (failures.narrowing)
    returned: bool = False  # its program is the one returned
    methods: list = field(default_factory=list)  # the rewritten functions it ran with
    # qualnames rewritten after it though torch named none of them: the classifier finds a branch on data
    # in each, reached from the model's forwards (discovery), which torch would name one retry at a time
    speculative: list = field(default_factory=list)
    dropped: list = field(default_factory=list)  # speculative rewrites dropped after it failed (the precise path)


@dataclass
class Guide:
    """The state of one guided export: the functions rewritten so far, and every attempt."""

    attempts: list = field(default_factory=list)
    rewritten: dict = field(default_factory=dict)  # the function swapped (or nested code) -> RewrittenMethod
    model: object = None  # the catalogue's semantic rewrites for its classes join the first retry
    asked: frozenset = frozenset()  # equalities of sizes dynamic_shapes itself states (failures.asked_equal)
    level: dict = field(default_factory=dict)  # key -> the last of _LEVELS it was rewritten with
    hooks: dict = field(default_factory=dict)  # function -> the catalogue's hooks for it (kept in any rewrite)
    # key -> lines of its ifs after which the rest moves into both branches (torch named each for a value
    # a cond cannot give: Options.continue_at), kept in every later rewrite of it
    continue_at: dict = field(default_factory=dict)
    # key -> lines of calls whose result is a Python value decided by data (Options.continue_calls), and
    # each such callee -> its variant running the caller's rest (runtime.continuation)
    continue_calls: dict = field(default_factory=dict)
    continued: dict = field(default_factory=dict)
    # key -> {line: (side kept, why the other cannot be traced)}: ifs torch could trace one side of only
    one_side: dict = field(default_factory=dict)
    one_sided: bool = False  # the user's option: an if on values may keep one side too (sizes always may)
    # key -> lines torch named for a value from data whose subscripts by data read through _ub.at
    # (Options.index_at: a 0-d tensor index, which strict export would read as a Python int)
    index_at: dict = field(default_factory=dict)
    # every cond's sides give their numbers as 0-d tensors (settings.numbers_held): set once torch.cond
    # refused a number a side gives under strict export, where dynamo lets the runtime retry no cond
    numbers_held: bool = False
    # (program, attempt, its captured output): the program with the fewest narrowings so far, of an
    # export that worked but accepts less than its dynamic dimensions asked; returned if no retry does better
    fallback: tuple | None = None
    speculative: set = field(default_factory=set)  # keys rewritten speculatively that torch has named nothing in

    @property
    def methods(self) -> list[RewrittenMethod]:
        return list(self.rewritten.values())

    def used(self) -> list[RewrittenMethod]:
        """The rewritten functions the program returned ran with (all of them, before one is)."""
        returned = [a for a in self.attempts if a.returned]
        return returned[0].methods if returned else self.methods

    def run(self, call):
        """``call()`` (one export) until it works; each failure at control flow on data rewrites what it names.

        "Works" means it covers what was asked: a program narrower than its dynamic dimensions
        (a branch on a size taken one way) has the branches that narrowed it rewritten and is
        exported again; the program returned is the one narrowing least, the first on a tie,
        and a retry that fails returns it (an export that works without unbranch works with it).
        """
        try:
            return self._run(call)
        except Exception:
            if self.fallback is None:
                raise
            return self._returned(self.fallback)

    def _returned(self, found):
        ep, attempt, log = found
        attempt.returned = True
        unreached = self._unreached(ep)
        attempt.methods = [rm for rm in attempt.methods if rm.code_object.co_filename not in unreached]
        if attempt is self.attempts[0]:
            log.replay()  # the export as the user ran it: what torch printed is theirs to see
        for rm in attempt.methods:
            for note in rm.notes:
                if note.kind == "one-sided":
                    warnings.warn(
                        f"unbranch: {rm.source.path}:{note.line}: one side of this if cannot be traced, the program "
                        f"holds the other alone ({note.detail}); an input taking the side left out raises",
                        stacklevel=_outside_unbranch(),
                    )
        if attempt.narrowed and attempt.sites:
            places = ", ".join(
                f"{s.where} ({attempt.why.get(s.where) or 'rewritten, no better'})" for s in attempt.sites
            )
            narrowed = "; ".join(attempt.narrowed)
            warnings.warn(
                f"unbranch: the program accepts less than its dynamic dimensions asked ({narrowed}): a branch on a "
                f"size at {places} narrowed it, and no rewrite of it covers more",
                stacklevel=_outside_unbranch(),
            )
        return ep

    def _run(self, call):
        for n in range(1, MAX_ATTEMPTS + 1):
            attempt = Attempt(methods=self.methods)
            self.attempts.append(attempt)
            with quiet(warnings_too=False) as log, GuardLog() as guards, Swallowed() as swallowed:
                held = applied(numbers_held=True) if self.numbers_held else contextlib.nullcontext()
                with swapped_in(self.methods), variants({fn: rm.func for fn, rm in self.continued.items()}), held:
                    try:
                        ep = call()
                    except Exception as e:  # decided below, outside the captured output
                        error = e
                    else:
                        error = None
            attempt.log = log.getvalue()
            hidden = swallowed.sites() if error is None else []
            if error is None and not hidden:
                attempt.narrowed = narrowing(ep, self.asked)
                if self.fallback is not None and len(attempt.narrowed) >= len(self.fallback[1].narrowed):
                    return self._returned(self.fallback)  # covers no more than a program before it
                if attempt.narrowed:
                    self.fallback = (ep, attempt, log)
                    attempt.sites = narrowed_by(attempt.narrowed, guards)
                    if attempt.sites and self._follow_sites(attempt):
                        continue
                return self._returned((ep, attempt, log))
            if hidden:
                # the user's own except caught torch's stop at a branch on data: the program has
                # the except side baked in for every input, which no export may return
                attempt.error = SWALLOWED
                attempt.sites = hidden
                if not self._follow_sites(attempt):
                    raise self._stuck(attempt, n - 1)
                continue
            try:
                self._after_failure(error, guards, attempt, n)
            except Exception:
                if not self.speculative:
                    raise
                self._drop(attempt)
        raise self._stuck(attempt, n) from error

    def _after_failure(self, error: BaseException, guards: GuardLog, attempt: Attempt, n: int) -> None:
        """Rewrite what export ``n``'s ``error`` names, for the next; raise where nothing can be."""
        attempt.error = first_line(error)
        ours = error if isinstance(error, UnbranchError) else runtime_failure(error)
        refused = ours or _refused_cond(error)  # (strict export: dynamo refuses the cond itself)
        if refused is not None and refused.line is None and error.__cause__ is not None:
            # refused inside a cond's branch, which dynamo traced: its user stack places it
            refused = runtime_failure(error.__cause__) or refused
        if refused is not None:
            attempt.error = first_line(refused)  # (strict: dynamo's graph break carries it)
        if refused is not None and self._speculative_at(refused.path, refused.line):
            return self._drop(attempt)  # (torch named no branch in that function: no precise path meets it)
        if not self.numbers_held and ours is None and gave_numbers(error):
            self.numbers_held = True  # (strict export; under non-strict export the runtime itself retried)
            return
        if refused is not None and self._continue_after(refused, attempt, error):
            return  # an if leaving a Python value: the rest of its function moves into its branches
        if isinstance(error, UnbranchError):
            # a cond's branch calls code that branches on data (non-strict export traces a cond
            # nested in a branch with dynamo, which names that code): rewrite it too
            cause = error.__cause__
            if cause is None or kind_of(cause) != "data" or not self._follow(cause, guards, attempt):
                if self._one_sided(error, attempt):
                    return
                if not attempt.why or (error.path is not None and not attempt.sites):
                    raise error  # the compiler's own reason at the user's line, where no site says more
                raise self._stuck(attempt, n - 1) from error
            return
        if ours is not None:
            if self._one_sided(error, attempt):
                return
            raise (self._stuck(attempt, n - 1) if attempt.why else ours) from error
        if kind_of(error) is None:
            if n == 1:
                raise error
            if self._one_sided(error, attempt):
                return
            raise self._failed_after(error) from error
        if n == 1:
            attempt.rewritten += self._rewrite_upfront()
        if not self._follow(error, guards, attempt) and not self._one_sided(error, attempt):
            raise self._stuck(attempt, n - 1) from error
        if n == 1:
            self._speculate(attempt)

    def _follow(self, error: BaseException, guards: GuardLog, attempt: Attempt) -> bool:
        """Rewrite the functions holding the places ``error`` names; did this attempt rewrite anything?"""
        attempt.sites = sites(error, guards)
        return self._follow_sites(attempt)

    def _follow_sites(self, attempt: Attempt) -> bool:
        """Rewrite the functions holding ``attempt.sites``; did this attempt rewrite anything?"""
        for site in attempt.sites:
            why = self._rewrite(site, attempt)
            if why:
                attempt.why[site.where] = why
        return bool(attempt.rewritten)

    @functools.cached_property
    def upfront(self) -> list:
        """(function, hooks) of the catalogue entries with hooks for the model's classes: semantic
        rewrites no control-flow conversion makes, applied from the first retry on."""
        from .discovery import catalogue_entries

        return [(fn, h) for fn, h in catalogue_entries(self.model) if h] if self.model is not None else []

    def _rewrite_upfront(self) -> list[str]:
        added = []
        for target, hooks in self.upfront:
            try:
                fn = innermost_function(target)
                rm = rewrite(fn, options_for(fn, strict=False, shape_conditions=False, **hooks))
            except UnbranchError:
                continue  # (a catalogue entry for code this install does not have)
            self.hooks[fn] = hooks
            if rm.changed and fn not in self.rewritten:
                self.rewritten[fn] = rm
                self.level[fn] = 0
                added.append(rm.qualname)
        return added

    @functools.cached_property
    def discovered(self) -> list:
        """(target, hooks) of each function the model's forwards reach that branches on data (model
        discovery); also where a function torch named is looked for first (``locate.function_for``)."""
        from .discovery import discover

        found = discover(self.model) if isinstance(self.model, torch.nn.Module) else []
        for target, hooks in found:
            if hooks:  # (a forward hook's options: kept in every rewrite of it, as the catalogue's)
                self.hooks.setdefault(innermost_function(target), hooks)
        return found

    def _function_for(self, code):
        return function_for(code, known=(target for target, _ in self.discovered))

    def _speculate(self, attempt: Attempt) -> None:
        """Rewrite, at level 0, each function the model's forwards reach in which the classifier finds a
        branch on data (model discovery), besides what torch named: torch would name them one export at a
        time. The runtime keeps each as written where its conditions are Python values under export."""
        for target, _ in self.discovered:
            try:
                fn = innermost_function(target)
                rm = None if fn in self.rewritten else self._rewritten(fn, fn, 0)
            except UnbranchError:
                continue  # (no source, or nothing it can be made of: torch names it if it matters)
            if rm is not None:
                self.speculative.add(fn)
                attempt.speculative.append(rm.qualname)

    def _speculative_at(self, path: str | None, line: int | None) -> bool:
        """Is ``path``:``line`` in a function rewritten speculatively?"""
        return any(self.rewritten[key].source.holds(path, line) for key in self.speculative)

    def _drop(self, attempt: Attempt) -> None:
        """The export failed with speculative rewrites in, where the precise path may not (a cond refused
        in a function torch never named, any error it cannot follow): drop them, keeping what torch named,
        and go on one named place at a time."""
        for key in self.speculative:
            attempt.dropped.append(self.rewritten.pop(key).qualname)
            for known in (self.level, self.continue_at, self.continue_calls, self.one_side):
                known.pop(key, None)
        self.speculative.clear()

    def _unreached(self, ep) -> set:
        """The speculative rewrites no node of program ``ep`` came from: the program holds nothing of them."""
        traces = "\n".join(
            node.meta.get("stack_trace") or ""
            for gm in ep.graph_module.modules()
            if isinstance(gm, torch.fx.GraphModule)
            for node in gm.graph.nodes
        )
        files = (self.rewritten[key].code_object.co_filename for key in self.speculative)
        return {f for f in files if f'"{f}"' not in traces}

    def _rewrite(self, site: Site, attempt: Attempt) -> str:
        """Rewrite the function ``site`` is in; "" on progress, else why nothing could be done."""
        code = None
        if site.path.startswith(GENERATED):
            found = self._nested_in_rewritten(site) or self._sizes_left(site)
            if found is None:
                return "" if self._indexed_at(site, attempt) else why_left(self.methods, site)
        else:
            code = site.code or code_at(site.path, site.line, site.name)
            found = self._function_for(code) if code is not None else None
        if found is None:
            return f"no function object runs {site.name}() of {site.path}"
        try:
            if isinstance(found, Nested):
                fn = found.probe
            elif code is not None and isinstance(found, types.FunctionType) and original_code(found) is code:
                fn = found  # the code torch stopped in: a decorator's wrapper itself, not what it wraps
            else:
                fn = innermost_function(found)
        except UnbranchError as e:
            return e.reason
        key = found.code if isinstance(found, Nested) else fn
        # torch stopping again in a function rewritten already (or at a size test): the next level
        first = 1 if site.kind == "shape" else 0
        start = self.level[key] + 1 if key in self.level else first
        if start >= len(_LEVELS):
            return "rewritten already"
        parent = found.parent if isinstance(found, Nested) else None
        rm = None
        try:
            for level in range(start, len(_LEVELS)):
                rm = self._rewritten(key, fn, level, parent)
                if rm is not None:
                    break
        except UnbranchError as e:
            return e.reason
        if rm is None:
            info = get_source(fn) if isinstance(key, types.FunctionType) else None
            if info is not None and info.holds(site.path, site.line):
                if self._index_at(key, fn, None, site.line - info.line + 1):
                    attempt.rewritten.append(self.rewritten[key].qualname)
                    return ""
            return _nothing_to_convert(site)
        self.speculative.discard(key)  # (torch named a place in it: the precise path has it too)
        attempt.rewritten.append(rm.qualname)
        return ""

    def _indexed_at(self, site: Site, attempt: Attempt) -> bool:
        """A line of a rewritten function torch named for a value from data: its subscripts by data read
        through ``_ub.at`` (``_index_at``). Did that change the function?"""
        original = source_map.lookup(site.path, site.line)
        for key, rm in self.rewritten.items():
            if original and rm.code_object.co_filename == site.path and rm.source.holds(*original):
                fn = rm.function if rm.parent is None else Nested(rm.parent, key).probe
                if self._index_at(key, fn, rm.parent, original[1] - rm.source.line + 1):
                    attempt.rewritten.append(rm.qualname)
                    return True
        return False

    def _index_at(self, key, fn, parent, line: int) -> bool:
        """Rewrite ``key`` with line ``line`` of its text reading its subscripts by data through
        ``_ub.at`` (rules.index_at); False where that changes nothing (no such subscript there)."""
        lines = self.index_at.get(key, frozenset())
        if line in lines:
            return False
        before = self.rewritten.get(key)
        self.index_at[key] = lines | {line}
        rm = self._rewrite_of(key, fn)
        if not rm.changed or (before is not None and rm.code == before.code):
            self.index_at[key] = lines
            return False
        self.rewritten[key] = dataclasses.replace(rm, parent=parent)
        self.level.setdefault(key, 0)
        return True

    def _continue_after(self, error: UnbranchError, attempt: Attempt, raised: BaseException) -> bool:
        """The runtime refused a cond whose sides give values no cond output can be (None, an object, a
        module, tensors of two dtypes) at a line of a function rewritten here: rewrite it with the rest of
        the function moved into that if's branches, where each side's values are its own; where those are
        its result itself, its caller's rest runs inside it (``_continue_in_caller``). Did it?"""
        if not unmerged(error.reason) or error.path is None or error.line is None:
            return False
        for key, rm in self.rewritten.items():
            if not rm.source.holds(error.path, error.line):
                continue
            line = error.line - rm.source.line + 1
            if line in self.continue_at.get(key, ()):  # (moved already: the value is the function's result)
                return _gives_result(rm.source.text, line) and self._continue_in_caller(
                    key, rm.code_object, raised, attempt
                )
            self.continue_at[key] = self.continue_at.get(key, frozenset()) | {line}
            fn = rm.function if rm.parent is None else Nested(rm.parent, key).probe
            changed = self._rewritten(key, fn, self.level.get(key, 0), rm.parent)
            if changed is not None:
                attempt.sites = [Site(error.path, error.line, rm.qualname.rsplit(".", 1)[-1])]
                attempt.rewritten.append(changed.qualname)
                return True
        return False

    def _continue_in_caller(
        self, key, code, raised: BaseException, attempt: Attempt, rm: RewrittenMethod | None = None
    ) -> bool:
        """``key`` (running ``code``)'s result is a Python value decided by data: rewrite the function that
        called it with the rest after that call made one function, which a variant of ``key`` runs on
        each side (normalise.call_rest). A caller returning that call's result hands it on: its own
        variant passes its caller's rest on, and so on up. Did it? ``rm``: the function of the if
        refused, where an error is said. Not for a nested function, nor for a call continued before."""
        rm = rm or self.rewritten[key]
        site = caller_of(raised, code) if isinstance(key, types.FunctionType) else None
        caller = self._caller(site) if site is not None else None
        if caller is None:
            if site is None and isinstance(key, types.FunctionType):
                self._not_continued(
                    attempt,
                    rm,
                    raised,
                    f"{key.__qualname__} gives it as the program's own result, whose structure would then differ "
                    "between paths (None or another Python value on one, tensors on another): no exported program "
                    "can give that",
                )
            return False
        caller_key, caller_fn, line = caller
        local = line - get_source(caller_fn, original_code(caller_fn)).line + 1
        if local in self.continue_calls.get(caller_key, ()):
            return False  # (continued already: the caller's own result differs, or the rest could not move)
        try:
            variant = self._rewrite_of(key, key, continuation=True)
        except UnbranchError:
            return False
        if not variant.changed:
            return False
        done = self.rewritten.get(caller_key)
        running = done.code_object if done is not None else original_code(caller_fn)  # (the caller's frame's)
        self.continue_calls[caller_key] = self.continue_calls.get(caller_key, frozenset()) | {local}
        changed = self._rewritten(caller_key, caller_fn, self.level.get(caller_key, 0))
        if changed is not None and "continued(" in changed.code:
            self.continued[key] = variant
            attempt.sites = [Site(site.path, line, caller_fn.__name__)]
            attempt.rewritten += [changed.qualname, f"{variant.qualname} (handing its result to the caller's rest)"]
            return True
        notes = changed.notes if changed is not None else self._rewrite_of(caller_key, caller_fn).notes
        left = [n.detail for n in notes if n.kind == "left" and n.line == line]
        if left and RETURNS_CALL in left[0]:  # the caller gives the value on as its own result
            self.continued[key] = variant
            if self._continue_in_caller(caller_key, running, raised, attempt, rm):
                attempt.rewritten.append(f"{variant.qualname} (handing its result to the caller's rest)")
                return True
            del self.continued[key]
            return False
        where = f"its caller {caller_fn.__qualname__} ({site.path}:{line}): "
        self._not_continued(attempt, rm, raised, where + (left[0] if left else "the call stays as written"))
        return False

    def _not_continued(self, attempt: Attempt, rm: RewrittenMethod, raised: BaseException, why: str) -> None:
        """Say, at the refused if, that its function's result is the Python value and why no caller can
        take it on each side."""
        path, line = place(raised)
        site = Site(path or rm.source.path, line or rm.source.line, rm.qualname.rsplit(".", 1)[-1])
        attempt.sites = [site]
        attempt.why[site.where] = (
            f"a side of this if gives a value no torch.cond can return (None, a Python number, an object) as "
            f"{rm.qualname}'s result; {why}"
        )

    def _rewrite_of(self, key, fn, level: int | None = None, **extra) -> RewrittenMethod:
        """``fn`` rewritten with what this guide knows of ``key``: its level (else the last), hooks, lines
        to continue after, sides kept; ``extra``: other options."""
        level = self.level.get(key, 0) if level is None else level
        options = {**_LEVELS[level], **self.hooks.get(fn, {}), "one_sided": self.one_sided, **self._known(key)}
        return rewrite(fn, options_for(fn, strict=False, lengths=True, **options, **extra))

    def _caller(self, site: Site) -> tuple | None:
        """(key, function, line in its file) of the function whose frame is ``site``: the user's, or
        one rewritten here (its line moved back to the original's)."""
        if site.path.startswith(GENERATED):
            for key, rm in self.rewritten.items():
                if rm.code_object.co_filename == site.path and isinstance(key, types.FunctionType):
                    found = source_map.lookup(site.path, site.line)
                    return (key, rm.function, found[1]) if found else None
            return None
        code = site.code or code_at(site.path, site.line, site.name)
        found = self._function_for(code) if code is not None else None
        if not isinstance(found, types.FunctionType):
            return None
        try:
            fn = innermost_function(found)
        except UnbranchError:
            return None
        return fn, fn, site.line

    def _known(self, key) -> dict:
        """What the guide knows of ``key`` for any rewrite of it: ifs after which its rest moves, calls
        whose rest it runs, ifs of which it keeps one side."""
        known = {}
        if key in self.continue_at:
            known["continue_at"] = self.continue_at[key]
        if key in self.continue_calls:
            known["continue_calls"] = self.continue_calls[key]
        if key in self.one_side:
            known["one_side"] = tuple((line, *kept) for line, kept in sorted(self.one_side[key].items()))
        if key in self.index_at:
            known["index_at"] = self.index_at[key]
        return known

    def _one_sided(self, error: BaseException, attempt: Attempt) -> bool:
        """A converted if one side of which torch could not trace (the failure is inside that side's
        function): rewrite its function keeping the other side, checked under export, where the
        condition is on sizes or the user allowed it (``one_sided``). Did the rewrite change anything?"""
        found = untraced_side(error)
        if found is None:
            return False
        path, line, side, why = found
        for key, rm in list(self.rewritten.items()):
            if not rm.source.holds(path, line):
                continue
            local = line - rm.source.line + 1
            kept = "else" if side == "then" else "then"
            sides = self.one_side.setdefault(key, {})
            if local in sides:
                return False  # (kept one side already: the failure is another)
            sides[local] = (kept, why)
            fn = rm.function if rm.parent is None else Nested(rm.parent, key).probe
            changed = self._rewritten(key, fn, self.level.get(key, 0), rm.parent)
            if changed is None or changed.code == rm.code:
                self.rewritten[key] = rm
                attempt.sites = [Site(path, line, rm.qualname.rsplit(".", 1)[-1])]
                attempt.why[attempt.sites[0].where] = (
                    f"the {side} side of this if cannot be traced ({why}); unbranch.export(..., one_sided=True) "
                    f"exports the {kept} side alone, with a check that the condition takes it"
                )
                return False
            attempt.sites = [Site(path, line, rm.qualname.rsplit(".", 1)[-1])]
            attempt.rewritten.append(changed.qualname)
            return True
        return False

    def _rewritten(self, key, fn, level: int, parent=None) -> RewrittenMethod | None:
        """``fn`` rewritten at ``level`` with what this guide knows of it (hooks, lines to continue after),
        kept as ``key``'s rewrite; None when nothing changed."""
        rm = self._rewrite_of(key, fn, level)
        if not rm.changed:
            return None
        self.rewritten[key] = dataclasses.replace(rm, parent=parent)
        self.level[key] = level
        return rm

    def _nested_in_rewritten(self, site: Site) -> Nested | None:
        """A function of the user's nested in a rewritten one (compiled with it, as written): its own rewrite.

        Functions unbranch made (branch bodies) and lambdas are part of the rewritten function itself.
        """
        if site.name.startswith("<"):
            return None
        for rm in self.methods:
            if rm.code_object.co_filename == site.path and rm.code_object.co_name != site.name:
                stack = [original_code(rm.function)]
                while stack:
                    code = stack.pop()
                    for c in code.co_consts:
                        if isinstance(c, types.CodeType):
                            if c.co_name == site.name:
                                return Nested(rm.parent or rm.function, c)
                            stack.append(c)
        return None

    def _sizes_left(self, site: Site):
        """The function whose rewritten code ``site`` is in, if a level of _LEVELS is left for it: torch
        stops at a size test or a parameter trusted by its annotation (kornia: ``if len(match_dists) == 0``
        after a mask)."""
        for key, rm in self.rewritten.items():
            if rm.code_object.co_filename == site.path and key is rm.function and self.level[key] + 1 < len(_LEVELS):
                return key
        return None

    def _stuck(self, attempt: Attempt, retries: int) -> UnbranchError:
        head = f"the export stops at Python control flow on data ({attempt.error})" + (
            f", still after {retries} retr{'y' if retries == 1 else 'ies'} with rewritten code" if retries else ""
        )
        if not attempt.sites:
            return UnbranchError(f"{head}; torch's error names no Python function of yours", construct="export")
        lines = []
        for s in attempt.sites:
            why = attempt.why.get(s.where, "?")
            original = source_map.lookup(s.path, s.line) if s.path.startswith(GENERATED) else None
            if original:  # (a line of rewritten code no rewrite took back: the line it stands for)
                s.path, s.line = original
            lines.append(f"  {s.where} in {s.name}(): {s.text or '?'}{caught(s)}  -- {why}")
        first = attempt.sites[0]
        return UnbranchError("\n".join([head, *lines]), first.path, first.line, "data-dependent control flow")

    def _failed_after(self, error: BaseException) -> UnbranchError:
        """The export of rewritten code failed otherwise: where (the user's frame) and, if torch.cond said so, why."""
        names = ", ".join(rm.qualname for rm in self.methods) or "nothing"
        path, line = place(error)
        if path is None and self.methods:  # (no frame of the user's: the function rewritten last)
            path, line = self.methods[-1].source.path, self.methods[-1].source.line
        return UnbranchError(f"after rewriting {names}, the export failed: {rejection(error)}", path, line, "export")


# how a function torch names is rewritten, each level when torch stops in it again (or the one
# before changed nothing): tensor conditions; size tests too (a size that is data:
# ``boxes.numel() == 0`` after a mask); parameters annotated ``int``/``bool`` as possible tensors too
# (diffusers passes a tensor timestep as ``prev_timestep: int``)
_LEVELS = [{"shape_conditions": False}, {"shape_conditions": True}, {"shape_conditions": True, "annotations": False}]

_COMPREHENSIONS = ("<listcomp>", "<genexpr>", "<setcomp>", "<dictcomp>")


def _nothing_to_convert(site: Site, rewritten: bool = False) -> str:
    if site.name in _COMPREHENSIONS:
        return (
            "a comprehension filtered on a tensor condition: how many items it keeps is data, which no "
            "exported program can hold as a Python list (a mask or torch.where over every item can)"
        )
    if site.inside:
        return f"the branch is in torch's own code ({site.inside}), which unbranch does not rewrite"
    done = "unbranch rewrote this function, but " if rewritten else ""
    return f"{done}this line needs a Python value computed from data, which no control-flow conversion gives"


def why_left(methods, site: Site) -> str:
    """A failure inside rewritten code: the construct at that line was left as Python (its reason), or is
    no branch. ``site`` is moved to the original file and line."""
    original = source_map.lookup(site.path, site.line)
    line = original[1] if original else None
    for rm in methods:
        if rm.code_object.co_filename == site.path:
            site.path, site.line = rm.source.path, line or rm.source.line
            left = [n.detail for n in rm.notes if n.kind == "left" and n.line == line]
            if left:
                return f"left as Python: {left[0]}"
    return _nothing_to_convert(site, rewritten=True)


def _gives_result(text: str, line: int) -> bool:
    """Is line ``line`` of function source ``text`` an ``if`` (or a ``return``) outside any loop, whose
    sides, once the rest of the function has moved into them, give the function's result?"""

    def walk(body) -> bool:
        for s in body:
            if s.lineno == line:
                return isinstance(s, (ast.If, ast.Return))
            if isinstance(s, (ast.If, ast.With, ast.Try)) and s.lineno < line <= s.end_lineno:
                blocks = [s.body, s.orelse] + [h.body for h in getattr(s, "handlers", [])]
                return any(walk(b) for b in blocks + [getattr(s, "finalbody", [])])
        return False

    tree = ast.parse(text)
    return bool(tree.body) and walk(tree.body[0].body)


def _refused_cond(error: BaseException) -> UnbranchError | None:
    """A known refusal of torch.cond's (``control_flow.torch_limit``) at the user's line, or None."""
    limit = torch_limit(error)
    return UnbranchError(limit, *place(error)) if limit else None


def _outside_unbranch() -> int:
    """The ``stacklevel`` of a warning that names the caller's first frame outside unbranch."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


_PACKAGE = os.path.dirname(os.path.dirname(__file__)) + os.sep


# what an attempt whose export returned a program stopped at: torch's error, caught by the user
SWALLOWED = (
    "torch's error was caught by the code's own except, so the plain program would take the except "
    "side for every input; no export may return it"
)


def caught(site: Site) -> str:
    """What to add where the user's code swallowed the error at ``site``."""
    if not site.swallowed:
        return ""
    return f" (caught by the try at {site.swallowed}: the program would take its except side for every input)"


def first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()] or [""]
    return f"{type(e).__name__}: {lines[0][:200]}"
