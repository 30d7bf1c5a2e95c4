"""Differential fuzzing of loops, bounded: index arithmetic, row writes, nested loops, appends.

``benchmarks/fuzz.py --loops`` runs hundreds of programs and exports; ``benchmarks/fuzz_loops.py``
those of the loop model.
"""

from fuzzing import PYTHON_ARGS, check_eager, check_export, programs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

BOUNDED = settings(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@settings(BOUNDED, max_examples=60)
@given(programs(loops=True))
def test_rewritten_loops_match_original(source):
    result = check_eager(source)
    assert result.divergence is None, str(result.divergence)


@settings(BOUNDED, max_examples=4)
@given(programs(loops=True), st.booleans())
def test_exported_loops_match_original(source, strict):
    divergence = check_export(source, PYTHON_ARGS[0], strict=strict)
    assert divergence is None, str(divergence)


def test_loop_model_programs_export_and_match():
    """A bounded sample of benchmarks/fuzz_loops.py's loops (exits at every position, nested, carried
    numbers, first-bound names, rows in place), each exported in one mode in turn: none diverges from
    Python in shape, dtype or value, eagerly or exported (a refusal is allowed: it says why)."""
    import random

    from loop_model import check, program

    rng = random.Random(54)
    outcomes = []
    for n in range(8):
        source, _ = program(rng)
        outcome = check(source, n, strict=n % 2 == 1)
        assert outcome["result"] in ("match", "refused"), f"{outcome}\n{source}"
        outcomes.append(outcome["result"])
    assert outcomes.count("match") >= 5  # (the recorded run: 101 of 120)
