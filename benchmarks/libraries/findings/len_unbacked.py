"""`num_rois = len(rois)` on a tensor whose length is data (torchvision/ops/poolers.py:185).
Two-stage detectors (Faster/Mask/Keypoint R-CNN) pool the boxes NMS kept; `Tensor.__len__`
must return a Python int: "Could not extract specialized integer from data-dependent
expression". No branch: unbranch.export finds nothing to convert and stops. `rois.shape[0]`
(a SymInt) exports fine: `len(x)` could become a runtime helper giving `x.shape[0]` for a
tensor under export (Python's len otherwise). Same cause elsewhere: kornia match_snn
(`if len(match_dists) == 0`, matching.py:233), diffusers' index_for_timestep, and on a
dynamic (backed) size `len()` specialises it: kornia posterize/solarize (adjust.py:1050/859).
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


pool.__code__ = compile(  # what a rewrite could make of it: rois.shape[0]
    "def pool(rois):\n    return torch.zeros(rois.shape[0], 3) + rois[:, :1]", "<fixed>", "exec"
).co_consts[0]
ep = torch.export.export(M(), (x, s))
assert torch.equal(ep.module()(x, s), M()(x, s))
print("with rois.shape[0]: exports and matches")
