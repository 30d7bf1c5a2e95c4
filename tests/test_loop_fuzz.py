"""Differential fuzzing of loops, bounded: index arithmetic, row writes, nested loops, appends.

``benchmarks/fuzz.py --loops`` runs hundreds of programs and exports.
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
