"""A size test on a data-dependent size whose branch calls a loop over torch.unique(...)
(torchvision/ops/boxes.py:86 batched_nms -> _batched_nms_vanilla, boxes.py:118).

With the `if` rewritten (named here; see numel_unbacked.py), torch.cond traces the callee's loop
over `torch.unique(idxs)` (data-dependent length) and fails (since main fbcd555 the error names
that loop). Needed: rewrite the callee's loop too (a while_loop over the indices of a sequence
of data-dependent length), so that both branches trace."""

import torch

import unbranch


def vanilla(boxes, idxs):
    keep = torch.zeros_like(idxs, dtype=torch.bool)
    for c in torch.unique(idxs):
        cur = torch.where(idxs == c)[0]
        keep[cur[boxes[cur].argmax()]] = True
    return torch.where(keep)[0]


def batched(boxes, idxs):
    if boxes.numel() > 40:
        return vanilla(boxes, idxs)
    return torch.argsort(boxes)


class M(torch.nn.Module):
    def forward(self, x, s, idxs):
        keep = torch.where(s > 0.5)[0]
        return batched(x[keep], idxs[keep])


try:
    with unbranch.torch_export_rewrite(rewrite=[batched]):
        unbranch.export(M(), (torch.rand(60), torch.rand(60), torch.randint(0, 3, (60,))))
    print("ok")
except unbranch.UnbranchError as e:
    print("FAILS:", e, "\ntorch.cond:", str(e.__cause__.__context__).splitlines()[:2])
