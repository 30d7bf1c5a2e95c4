"""Programs in the layouts Python accepts, each with its twin spelled one statement a line.

Kept out of ``ruff format`` (pyproject.toml), which would rewrite them into their twins.
"""

import torch


def if_suite(x):
    if x.sum() > 0: x = x * 2
    return x


def if_suite_twin(x):
    if x.sum() > 0:
        x = x * 2
    return x


def elif_suites(x):
    if x.sum() > 1: x = x * 2
    elif x.sum() < -1: x = x * 3
    else: x = x - 1
    return x


def elif_suites_twin(x):
    if x.sum() > 1:
        x = x * 2
    elif x.sum() < -1:
        x = x * 3
    else:
        x = x - 1
    return x


def while_suite(x):
    while x.abs().sum() > 1: x = x * 0.5
    return x


def while_suite_twin(x):
    while x.abs().sum() > 1:
        x = x * 0.5
    return x


def for_suite(x):
    out = torch.zeros_like(x)
    for i in range(x.shape[0]): out[i] = x[i] * 2 + 1
    return out


def for_suite_twin(x):
    out = torch.zeros_like(x)
    for i in range(x.shape[0]):
        out[i] = x[i] * 2 + 1
    return out


def suite_of_two(x):
    if x.sum() > 0: a = x * 2; x = a + 1
    return x


def suite_of_two_twin(x):
    if x.sum() > 0:
        a = x * 2
        x = a + 1
    return x


def line_of_two(x):
    if x.sum() > 0:
        a = x * 2; x = a + 1  # two statements, one line
    return x


def else_suite(x):
    if x.sum() > 0:
        x = x * 2
    else: x = x - 1
    return x


def else_suite_twin(x):
    if x.sum() > 0:
        x = x * 2
    else:
        x = x - 1
    return x


def return_suite(x):
    if x.sum() > 0: return x * 2
    return x - 1


def return_suite_twin(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


def raise_suite(x):
    if x.sum() > 100: raise ValueError("too large")
    return x - 1


def raise_suite_twin(x):
    if x.sum() > 100:
        raise ValueError("too large")
    return x - 1


def pass_suite(x):
    y = x * 2
    if x.sum() > 0: pass
    else: y = -x
    return y


def pass_suite_twin(x):
    y = x * 2
    if x.sum() > 0:
        pass
    else:
        y = -x
    return y


def annotated(x: torch.Tensor) -> torch.Tensor:
    y: torch.Tensor = x * 2
    if x.sum() > 0: y: torch.Tensor = y + 1
    return y


def annotated_twin(x: torch.Tensor) -> torch.Tensor:
    y: torch.Tensor = x * 2
    if x.sum() > 0:
        y: torch.Tensor = y + 1
    return y


def commented_clauses(x):
    if x.sum() > 0:
        # the positive side

        y = x * 2  # doubled
    # the other side

    else:  # negative
        y = -x
    return y


def commented_clauses_twin(x):
    if x.sum() > 0:
        y = x * 2
    else:
        y = -x
    return y


def parenthesised(x):
    if (
        x.sum() > 0
        and x.max() > 0.1
    ):
        x = x * 2
    return x


def parenthesised_twin(x):
    if x.sum() > 0 and x.max() > 0.1:
        x = x * 2
    return x


def backslashed(x):
    if x.sum() > 0 \
            and x.max() > 0.1:
        x = x * 2
    return x


def loop_break_suite(x):
    acc = torch.zeros_like(x[0])
    for i in range(x.shape[0]):
        if x[i].sum() > 2: break
        acc = acc + x[i]
    return acc


def loop_break_suite_twin(x):
    acc = torch.zeros_like(x[0])
    for i in range(x.shape[0]):
        if x[i].sum() > 2:
            break
        acc = acc + x[i]
    return acc


def ternary_line(x): y = x * 2 if x.sum() > 0 else -x; return y


def ternary_line_twin(x):
    y = x * 2 if x.sum() > 0 else -x
    return y


def with_suite(x):
    with torch.no_grad(): y = x * 2
    if y.sum() > 0: y = y + 1
    return y


def with_suite_twin(x):
    with torch.no_grad():
        y = x * 2
    if y.sum() > 0:
        y = y + 1
    return y


def tabbed(x):
	if x.sum() > 0: x = x * 2
	else:
		x = -x
	return x


def tabbed_twin(x):
    if x.sum() > 0:
        x = x * 2
    else:
        x = -x
    return x


CASES = [
    (if_suite, if_suite_twin),
    (elif_suites, elif_suites_twin),
    (while_suite, while_suite_twin),
    (for_suite, for_suite_twin),
    (suite_of_two, suite_of_two_twin),
    (line_of_two, suite_of_two_twin),
    (else_suite, else_suite_twin),
    (return_suite, return_suite_twin),
    (raise_suite, raise_suite_twin),
    (pass_suite, pass_suite_twin),
    (annotated, annotated_twin),
    (commented_clauses, commented_clauses_twin),
    (parenthesised, parenthesised_twin),
    (backslashed, parenthesised_twin),
    (loop_break_suite, loop_break_suite_twin),
    (ternary_line, ternary_line_twin),
    (with_suite, with_suite_twin),
    (tabbed, tabbed_twin),
]
