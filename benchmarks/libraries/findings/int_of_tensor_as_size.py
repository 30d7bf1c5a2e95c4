"""`dim_size = int(index.max()) + 1 if index.numel() > 0 else 0`, then a size of it (torch_geometric
_scatter.py:48 → :60; maybe_num_nodes, to_dense_batch...). The plain export stops at `int(...)`;
unbranch rewrites it to `_ub.int_(...)`, a 0-d tensor under export, which `torch.Size` refuses.
`index.max().item() + 1` (an unbacked SymInt) exports as is and matches eager."""

import torch

import unbranch


def scatter_sum(src, index):
    dim_size = int(index.max()) + 1 if index.numel() > 0 else 0
    size = src.size()[:0] + (dim_size,) + src.size()[1:]
    return src.new_zeros(size).scatter_add_(0, index.view(-1, 1).expand_as(src), src)


def scatter_item(src, index):  # what a rewrite could make of int(t): t.item()
    dim_size = index.max().item() + 1 if index.numel() > 0 else 0
    size = src.size()[:0] + (dim_size,) + src.size()[1:]
    return src.new_zeros(size).scatter_add_(0, index.view(-1, 1).expand_as(src), src)


class M(torch.nn.Module):
    def forward(self, x, batch):
        return scatter_sum(x, batch)


x, batch = torch.randn(10, 4), torch.tensor([0] * 5 + [1] * 5)
dyn = {"x": {0: torch.export.Dim.DYNAMIC}, "batch": {0: torch.export.Dim.DYNAMIC}}
try:
    unbranch.export(M(), (x, batch), dynamic_shapes=dyn)
    print("unbranch.export: ok")
except unbranch.UnbranchError as e:
    print("unbranch.export FAILS:", str(e).splitlines()[0][:200])
scatter_sum.__code__ = scatter_item.__code__
ep = torch.export.export(M(), (x, batch), dynamic_shapes=dyn)
b3 = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 2])
assert torch.equal(ep.module()(x, b3), M()(x, b3)) and ep.module()(x, b3).shape[0] == 3
print("with index.max().item(): exports and matches (3 graphs too)")
