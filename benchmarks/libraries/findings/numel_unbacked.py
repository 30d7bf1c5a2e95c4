"""`if boxes.numel() == 0: return empty` on a data-dependent size (torchvision/ops/boxes.py:103).

torchvision's batched_nms (every detector's post-processing) tests the number of boxes kept by
a mask. Plain export: GuardOnDataDependentSymNode Eq(4*u0, 0). unbranch.export names the
line but rewrites the function without shape conditions (the failure is of kind "data"), so
the rewrite changes nothing: "this line needs a Python value computed from data". Rewriting it
with shape conditions (what transform_method does by default) gives a cond that exports and
matches eager on both sides (shown below with torch_export_rewrite(rewrite=[pick])).
"""

import torch

import unbranch


def pick(boxes, scores):
    if boxes.numel() == 0:
        return torch.empty((0,), dtype=torch.int64)
    return torch.argsort(scores, descending=True)


class M(torch.nn.Module):
    def forward(self, boxes, scores):
        keep = torch.where(scores > 0.5)[0]
        return pick(boxes[keep], scores[keep])


x, s = torch.rand(6, 4), torch.rand(6)
with unbranch.torch_export_rewrite(rewrite=[pick]):
    ep = torch.export.export(M(), (x, s))  # works: a cond on Eq(4*u0, 0)
for scores in (s, s * 0):
    assert torch.equal(ep.module()(x, scores), M()(x, scores))
print("named explicitly: exports, matches both sides")
try:
    unbranch.export(M(), (x, s))
    print("unbranch.export: ok")
except unbranch.UnbranchError as e:
    print("unbranch.export FAILS:", e)
