"""`num_rois = len(rois)` on a tensor whose length is data (torchvision/ops/poolers.py:185).

Every two-stage detector (Faster/Mask/Keypoint R-CNN) pools the boxes NMS kept:
`_multiscale_roi_align` calls `len(rois)`, and `Tensor.__len__` must return a Python int, so
torch raises "Could not extract specialized integer from data-dependent expression". No branch
is involved: unbranch.export rewrites the function, finds nothing to convert, and stops
("needs a Python value computed from data"). `rois.shape[0]` (a SymInt) exports fine, so a
rewrite of `len(x)` into a runtime helper returning `x.shape[0]` for a tensor under export
(Python's len otherwise) would get past it.
"""

import torch

import unbranch


def pool(rois):
    num_rois = len(rois)
    return torch.zeros(num_rois, 3) + rois[:, :1]


class M(torch.nn.Module):
    def forward(self, boxes, scores):
        keep = torch.where(scores > 0.5)[0]
        return pool(boxes[keep])


x, s = torch.rand(6, 4), torch.rand(6)
try:
    unbranch.export(M(), (x, s))
    print("unbranch.export: ok")
except unbranch.UnbranchError as e:
    print("unbranch.export FAILS:", e)


class Fixed(torch.nn.Module):  # what a rewrite could make of it
    def forward(self, boxes, scores):
        rois = boxes[torch.where(scores > 0.5)[0]]
        return torch.zeros(rois.shape[0], 3) + rois[:, :1]


ep = torch.export.export(Fixed(), (x, s))
assert torch.equal(ep.module()(x, s), M()(x, s))
print("with rois.shape[0]: exports and matches")
