"""`if box_sum > 0: rel_codes = rel_codes.reshape(box_sum, -1)` with box_sum a data-dependent size
(torchvision/models/detection/_utils.py:176, BoxCoder.decode: every R-CNN/RetinaNet/FCOS decode).

unbranch.export rewrites `decode` into a cond, but torch.cond rejects the branch's operand
`box_sum`, an unbacked SymInt ("Attempted to wrap unbacked SymInt"; since main fbcd555 the
UnbranchError says so, before it blamed "a Python value computed from data"). Needed: a branch
reading a size from data gets it as a tensor operand (a 0-d int64 tensor, read back inside the
branch with .item() and torch._check_is_size), or the size recomputed from the tensors it
came from.
"""

import torch

import unbranch


def decode(rel_codes, boxes):
    box_sum = 0
    for b in boxes:
        box_sum += b.size(0)
    if box_sum > 0:
        rel_codes = rel_codes.reshape(box_sum, -1)
    return rel_codes * 2


class M(torch.nn.Module):
    def forward(self, x, s):
        keep = torch.where(s > 0.5)[0]
        return decode(torch.cat([x[keep], x[keep]]).reshape(-1), [x[keep], x[keep]])


try:
    unbranch.export(M(), (torch.rand(6, 4), torch.rand(6)))
    print("unbranch.export: ok")
except unbranch.UnbranchError as e:
    print("unbranch.export FAILS:", e)
    print("what torch.cond said:", str(e.__cause__.__context__).splitlines()[:4])
