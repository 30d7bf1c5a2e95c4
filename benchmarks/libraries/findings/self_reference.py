"""FIXED on main (ea9a0c3): kept as a regression check.

A function that names itself (torchvision/ops/boxes.py:57, batched_nms: `_log_api_usage_once(batched_nms)`).

Every public torchvision op logs its own use with `_log_api_usage_once(<the function itself>)`;
recursion does the same. Once such a function has a branch to convert, transform_method (and
the guided export) fails: "rewritten code has free variables ('batched',), the original ()".
loader.compile_function compiles the rewritten `def` nested in `__unbranch_outer__`, where the
`def` statement makes the function's name a local of the outer function, so the function's
reference to its own (global) name becomes a closure variable. Compiling the def under another
name (and renaming the code object) would keep the name global, as in the original.
"""

import unbranch


def log_once(f):
    pass


def batched(boxes, scores):
    log_once(batched)
    if boxes.numel() > 40:
        return boxes
    return scores


try:
    print(unbranch.transform_method(batched).code)
except unbranch.UnbranchError as e:
    print("transform_method FAILS:", e)
