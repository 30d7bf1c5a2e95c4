"""Differential fuzzing, bounded: random ``if`` programs agree eagerly, rewritten and exported.

Exports cost seconds each, so only a few programs are exported here;
``benchmarks/fuzz.py`` runs thousands of programs and hundreds of exports.
"""

import re

from fuzzing import PYTHON_ARGS, branches_on_tensors, check_eager, check_export, load, programs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import unbranch

# generating a program draws hundreds of choices: hypothesis would call that slow
BOUNDED = settings(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
# smaller programs to export: the export time grows with the number of conds
EXPORTED = programs(max_statements=12).filter(branches_on_tensors)


@settings(BOUNDED, max_examples=100)
@given(programs())
def test_rewritten_matches_original(source):
    result = check_eager(source)
    assert result.divergence is None, str(result.divergence)


@settings(BOUNDED, max_examples=8)
@given(EXPORTED, st.sampled_from(PYTHON_ARGS))
def test_exported_matches_original(source, python_args):
    # an if whose effects a cond could not keep is refused with its reason: never a different result
    divergence = check_export(source, python_args, strict=False)
    assert divergence is None or divergence.kind == "refusal", str(divergence)


@settings(BOUNDED, max_examples=3)
@given(EXPORTED, st.sampled_from(PYTHON_ARGS))
def test_exported_matches_original_strict(source, python_args):
    divergence = check_export(source, python_args, strict=True)
    assert divergence is None or divergence.kind == "refusal", str(divergence)


# side effects: aliases, views, in-place ops, a mutating helper, an appended list, a closure
EFFECTS = programs(effects=True)


@settings(BOUNDED, max_examples=60)
@given(EFFECTS)
def test_effects_rewritten_matches_original(source):
    result = check_eager(source)
    assert result.divergence is None, str(result.divergence)


@settings(BOUNDED, max_examples=6)
@given(programs(max_statements=12, effects=True).filter(branches_on_tensors), st.sampled_from(PYTHON_ARGS))
def test_effects_exported_matches_original(source, python_args):
    divergence = check_export(source, python_args, strict=False)
    assert divergence is None or divergence.kind == "refusal", str(divergence)


# conditional expressions (a if p else b) among the expressions
TERNARIES = programs(ternaries=True)


@settings(BOUNDED, max_examples=40)
@given(TERNARIES)
def test_ternaries_rewritten_matches_original(source):
    result = check_eager(source)
    assert result.divergence is None, str(result.divergence)


@settings(BOUNDED, max_examples=4)
@given(programs(max_statements=12, ternaries=True).filter(branches_on_tensors), st.sampled_from(PYTHON_ARGS))
def test_ternaries_exported_matches_original(source, python_args):
    divergence = check_export(source, python_args, strict=False)
    assert divergence is None or divergence.kind == "refusal", str(divergence)


# what real code writes: chained comparisons, bool()/int() tests, checks that raise, a closure read after
REALCODE = programs(realcode=True)


@settings(BOUNDED, max_examples=40)
@given(REALCODE)
def test_realcode_rewritten_matches_original(source):
    result = check_eager(source)
    assert result.divergence is None, str(result.divergence)


@settings(BOUNDED, max_examples=4)
@given(programs(max_statements=12, realcode=True).filter(branches_on_tensors), st.sampled_from(PYTHON_ARGS))
def test_realcode_exported_matches_original(source, python_args):
    divergence = check_export(source, python_args, strict=False)
    assert divergence is None or divergence.kind == "refusal", str(divergence)


_CONSTRUCT = re.compile(r"^\s*(if|elif|while|for|assert|torch\._assert)\b|\bif\b.*\belse\b")


@settings(BOUNDED, max_examples=150)
@given(
    st.one_of(
        programs(realcode=True),
        programs(effects=True, ternaries=True),
        programs(jumps=True),
        programs(loops=True),
    )
)
def test_every_note_is_on_the_line_of_its_construct(source):
    """A refusal or a conversion is reported at its own line (errors name it): statements that
    passes rebuild around it (an elif made ``else: if``, code moved into a branch or into a
    function of its own) keep their lines."""
    fn = load(source)
    lines = open(fn.__code__.co_filename).read().splitlines()
    try:
        notes = unbranch.transform_method(fn, strict=False).notes
    except unbranch.UnbranchError:
        return
    for note in notes:
        assert _CONSTRUCT.search(lines[note.line - 1]), f"{note} is on {lines[note.line - 1]!r}\n{source}"


# issue 37's families: Python values, loop lengths and reports decided by data, a predicate's other
# spellings, lists and dicts of tensors changed in branches (what each reports must agree eagerly too)
FAMILIES = programs(families=True)


@settings(BOUNDED, max_examples=40)
@given(FAMILIES)
def test_families_rewritten_matches_original(source):
    result = check_eager(source)
    assert result.divergence is None, str(result.divergence)


@settings(BOUNDED, max_examples=6)
@given(programs(max_statements=12, families=True), st.sampled_from(PYTHON_ARGS))
def test_families_exported_matches_original(source, python_args):
    # a construct no conversion gives (a helper returning None on one path, a callable picked from a
    # tuple by int(t)) fails the export as the plain export does, with unbranch's reason: never a
    # different result, a crash inside unbranch, or a failure where the plain export works (harm)
    divergence = check_export(source, python_args, strict=False)
    assert divergence is None or divergence.kind in ("refusal", "export-error"), str(divergence)


@settings(BOUNDED, max_examples=4)
@given(programs(max_statements=12, families=True), st.sampled_from(PYTHON_ARGS))
def test_families_exported_matches_original_strict(source, python_args):
    divergence = check_export(source, python_args, strict=True)
    assert divergence is None or divergence.kind in ("refusal", "export-error"), str(divergence)
