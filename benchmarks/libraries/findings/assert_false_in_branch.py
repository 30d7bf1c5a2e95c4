"""`if degenerate_boxes.any(): ...; torch._assert(False, f"... {degen_bb} ...")`
(torchvision/models/detection/generalized_rcnn.py:104, and the same check in retinanet.py:618,
fcos.py:604, ssd.py:361: every detector in train mode validates its target boxes this way).

The branch always fails: its statements only compute what the message shows (`.tolist()` of
the first bad box), then `torch._assert(False, msg)`. unbranch does not read it as
`if c: raise`: it becomes a cond whose then-branch calls `.tolist()` on floats, which torch.cond
rejects. Needed: an `if` whose body ends in `torch._assert(False, msg)` / `assert False, msg`
(or a raise) is a check; statements feeding only the message run only when it fails.
"""

import torch

import unbranch


class Train(torch.nn.Module):
    def forward(self, x, boxes):
        degenerate = boxes[:, 2:] <= boxes[:, :2]
        if degenerate.any():
            bb_idx = torch.where(degenerate.any(dim=1))[0][0]
            degen_bb: list[float] = boxes[bb_idx].tolist()
            torch._assert(False, f"All bounding boxes should have positive height and width. Found {degen_bb}.")
        return x * 2


boxes = torch.tensor([[1.0, 1.0, 5.0, 6.0], [2.0, 3.0, 8.0, 9.0]])
try:
    ep = unbranch.export(Train(), (torch.ones(2), boxes))
    print("exports:", ep.module()(torch.ones(2), boxes))
except unbranch.UnbranchError as e:
    print("unbranch.export FAILS:", str(e)[:200])
