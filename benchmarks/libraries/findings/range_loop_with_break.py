"""`for i in range(n_iters)` over a size, with a data-dependent `break` in the body
(kornia/contrib/distance_transform.py:163, _distance_transform_2d_impl).

n_iters = ceil(max(H, W) / k) is symbolic under dynamic H, W. Plain export works but unrolls the
loop: the program guards `ceil(max(W, H)) == 32` and fails at any other size. unbranch.export
returns that program untouched (the plain export worked). Even named explicitly, the loop is not
converted: the break becomes a flag, but the loop stays Python with no note in rm.notes; the same
loop without the break becomes a scan and the program is right at every size.
Needed: such a loop (break lowered to a flag) as a while_loop, or a note saying why not.
"""

import math

import torch
from torch.export import Dim

import unbranch


def grow(image):
    n_iters = math.ceil(max(image.shape[2], image.shape[3]) / 1)
    out, checks = torch.zeros_like(image), ()
    for i in range(n_iters):
        mask = image > i / 64
        if i + 1 in checks and not bool(mask.any()):
            break
        out = out + mask.to(out.dtype)
    return out


class M(torch.nn.Module):
    def forward(self, image):
        return grow(image)


print("notes:", unbranch.transform_method(grow).notes)  # no loop note
with unbranch.torch_export_rewrite(rewrite=[grow]):
    ep = torch.export.export(M(), (torch.rand(1, 1, 8, 8),), dynamic_shapes=({2: Dim.DYNAMIC, 3: Dim.DYNAMIC},))
ep.module()(torch.rand(1, 1, 12, 12))  # AssertionError: Guard failed: math.ceil(max(...) / 1) == 8
