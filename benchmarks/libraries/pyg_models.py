"""torch_geometric (graph networks): message-passing layers, whole models, pooling, aggregations and utils.

    pip install torch_geometric==2.8.1     # pure Python; no torch_scatter / torch_sparse / torch_cluster

Each model takes node features ``x`` (nodes × features), ``edge_index`` (2 × edges) and, for the
pools and readouts, ``batch`` (the graph of each node); the numbers of nodes and edges are dynamic.
PyG sizes its outputs from the data where no size is given (``int(batch.max()) + 1`` graphs,
``int(index.max()) + 1`` nodes) and pools keep a number of nodes per graph read from the data:
the flips give a batch of three graphs instead of two, or other scores.
"""

from __future__ import annotations

import torch

from .harness import Built, Entry, call, grouped, space

N, E, F = 10, 30, 8
NODES = {0: space(4)}
EDGES = {1: space(6)}


def graph(n: int = N, e: int = E, f: int = F, seed: int = 0):
    torch.manual_seed(seed)
    x = torch.randn(n, f)
    src = torch.randint(0, n, (e,))
    dst = (src + torch.randint(1, n, (e,))) % n  # no self-loops
    return x, torch.stack([src, dst])


def batch_of(n: int = N, graphs: int = 2) -> torch.Tensor:
    return torch.arange(n) * graphs // n  # sorted: graph 0's nodes first


def conv(make, edge_attr: int | None = None, **extra):
    """``layer(x, edge_index[, edge_attr])``."""

    def build():
        torch.manual_seed(0)
        x, ei = graph()
        inputs, shapes = {"x": x, "edge_index": ei}, {"x": NODES, "edge_index": EDGES}
        if edge_attr:
            inputs["edge_attr"], shapes["edge_attr"] = torch.randn(E, edge_attr), {0: space(6)}
        return Built(make(), inputs, shapes, **extra)

    return build


def with_batch(make, fn_names=("x", "edge_index", "batch"), flip_scores: bool = False):
    """``model(x, edge_index, batch)``; flips: three graphs in the batch."""

    def build():
        torch.manual_seed(0)
        x, ei = graph()
        model = make()
        names = [n for n in fn_names]
        full = {"x": x, "edge_index": ei, "batch": batch_of()}
        shapes_all = {"x": NODES, "edge_index": EDGES, "batch": NODES}
        inputs = {k: full[k] for k in names}
        shapes = {k: shapes_all[k] for k in names}
        flips = {"three graphs": {**inputs, "batch": batch_of(graphs=3)}} if "batch" in names else {}
        if flip_scores:
            x2, _ = graph(seed=1)
            flips["other features"] = {**inputs, "x": x2 * 3}
        return Built(model, inputs, shapes, flips=flips)

    return build


def convs() -> dict:
    import torch_geometric.nn as gnn

    return {
        "GCNConv": conv(lambda: gnn.GCNConv(F, 16)),
        "GATConv": conv(lambda: gnn.GATConv(F, 8, heads=2)),
        "GATv2Conv": conv(lambda: gnn.GATv2Conv(F, 8, heads=2, edge_dim=3), edge_attr=3),
        "SAGEConv": conv(lambda: gnn.SAGEConv(F, 16)),
        "GINConv": conv(lambda: gnn.GINConv(torch.nn.Sequential(torch.nn.Linear(F, 16), torch.nn.ReLU()))),
        "ChebConv": conv(lambda: gnn.ChebConv(F, 16, K=3)),
        "EdgeConv": conv(lambda: gnn.EdgeConv(torch.nn.Linear(2 * F, 16))),
        "GENConv": conv(lambda: gnn.GENConv(F, 16, aggr="softmax", learn_t=True)),
        "PNAConv": conv(lambda: gnn.PNAConv(F, 16, ["mean", "max", "std"], ["identity", "amplification"], deg=_deg())),
        "TransformerConv": conv(lambda: gnn.TransformerConv(F, 8, heads=2)),
    }


def _deg() -> torch.Tensor:
    return torch.tensor([0, 2, 5, 3, 1], dtype=torch.long)


def models() -> dict:
    import torch_geometric.nn as gnn

    def basic(cls, **kw):
        return conv(lambda: cls(F, 16, num_layers=2, out_channels=4, **kw))

    return {
        "GCN": basic(gnn.GCN),
        "GAT": basic(gnn.GAT, heads=2),
        "GraphSAGE": basic(gnn.GraphSAGE),
        "PNA": basic(gnn.PNA, aggregators=["mean", "max"], scalers=["identity"], deg=_deg()),
        "GPSConv": with_batch(lambda: gnn.GPSConv(F, gnn.GINConv(torch.nn.Linear(F, F)), heads=2)),
        "GAE.recon_loss": gae,
    }


def gae() -> Built:
    import torch_geometric.nn as gnn

    class Recon(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gae = gnn.GAE(gnn.GCN(F, 16, num_layers=2))

        def forward(self, x, edge_index):
            z = self.gae.encode(x, edge_index)
            return self.gae.decoder.forward_all(z)

    x, ei = graph()
    return Built(Recon(), {"x": x, "edge_index": ei}, {"x": NODES, "edge_index": EDGES})


def pools() -> dict:
    import torch_geometric.nn as gnn

    def readout(f):
        return with_batch(lambda: call(f, ["x", "batch"]), ("x", "batch"))

    return {
        "global_mean_pool": readout(gnn.global_mean_pool),
        "global_max_pool": readout(gnn.global_max_pool),
        "global_add_pool": readout(gnn.global_add_pool),
        "TopKPooling": with_batch(lambda: _Pool(gnn.TopKPooling(F, ratio=0.5)), flip_scores=True),
        "SAGPooling": with_batch(lambda: _Pool(gnn.SAGPooling(F, ratio=0.5)), flip_scores=True),
        "TopKPooling.min_score": with_batch(lambda: _Pool(gnn.TopKPooling(F, min_score=0.2)), flip_scores=True),
        "ASAPooling": with_batch(lambda: _Pool(gnn.ASAPooling(F, ratio=0.5)), flip_scores=True),
        "EdgePooling": with_batch(lambda: _Pool(gnn.EdgePooling(F)), flip_scores=True),
        "dense_diff_pool": diff_pool,
    }


class _Pool(torch.nn.Module):
    def __init__(self, pool):
        super().__init__()
        self.pool = pool

    def forward(self, x, edge_index, batch):
        out = self.pool(x, edge_index, batch=batch)
        return tuple(t for t in out if isinstance(t, torch.Tensor))


def diff_pool() -> Built:
    import torch_geometric.nn as gnn
    from torch_geometric.utils import to_dense_adj, to_dense_batch

    class Diff(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.assign = gnn.GCNConv(F, 16), gnn.GCNConv(F, 3)

        def forward(self, x, edge_index, batch):
            z, s = self.embed(x, edge_index), self.assign(x, edge_index)
            zd, mask = to_dense_batch(z, batch)
            sd, _ = to_dense_batch(s, batch)
            adj = to_dense_adj(edge_index, batch)
            return gnn.dense_diff_pool(zd, adj, sd, mask)

    return with_batch(Diff)()


def aggregations() -> dict:
    import torch_geometric.nn.aggr as A

    def build(make):
        def inner():
            b = with_batch(lambda: None, ("x", "batch"))()
            model = _Agg(make())
            return Built(model, b.inputs, b.shapes, flips=b.flips)

        return inner

    return {
        "SoftmaxAggregation": build(lambda: A.SoftmaxAggregation(learn=True)),
        "MedianAggregation": build(A.MedianAggregation),
        "SortAggregation": build(lambda: A.SortAggregation(k=3)),
        "Set2Set": build(lambda: A.Set2Set(F, processing_steps=2)),
        "LSTMAggregation": build(lambda: A.LSTMAggregation(F, 8)),
    }


class _Agg(torch.nn.Module):
    def __init__(self, aggr):
        super().__init__()
        self.aggr = aggr

    def forward(self, x, batch):
        return self.aggr(x, batch)


def utils() -> dict:
    import torch_geometric.utils as U

    def on_graph(f, names=("edge_index",), **fixed):
        def inner():
            x, ei = graph()
            full = {"x": x, "edge_index": ei, "src": x[:, 0], "index": ei[1]}
            shapes = {"x": NODES, "edge_index": EDGES, "src": NODES, "index": {0: space(6)}}
            if "src" in names:  # scores per edge
                full["src"], shapes["src"] = torch.randn(E), {0: space(6)}
            inputs = {k: full[k] for k in names}
            return Built(call(f, names, **fixed), inputs, {k: shapes[k] for k in names})

        return inner

    return {
        "softmax": on_graph(U.softmax, ("src", "index")),
        "add_remaining_self_loops": on_graph(U.add_remaining_self_loops),
        "to_undirected": on_graph(U.to_undirected),
        "coalesce": on_graph(U.coalesce),
        "is_undirected": on_graph(lambda edge_index: torch.tensor(U.is_undirected(edge_index))),
        "to_dense_adj": on_graph(U.to_dense_adj),
        "subgraph": subgraph,
        "k_hop_subgraph": k_hop,
        "to_dense_batch": with_batch(lambda: call(U.to_dense_batch, ["x", "batch"]), ("x", "batch")),
        "unbatch": with_batch(
            lambda: call(lambda x, batch: tuple(U.unbatch(x, batch)), ["x", "batch"]), ("x", "batch")
        ),
    }


def subgraph() -> Built:
    import torch_geometric.utils as U

    x, ei = graph()
    keep = torch.tensor([True, False] * (N // 2))
    f = call(
        lambda subset, edge_index: U.subgraph(subset, edge_index, relabel_nodes=True, num_nodes=N),
        ["subset", "edge_index"],
    )
    return Built(f, {"subset": keep, "edge_index": ei}, {"subset": None, "edge_index": EDGES})


def k_hop() -> Built:
    import torch_geometric.utils as U

    x, ei = graph()

    def f(node_idx, edge_index):
        return U.k_hop_subgraph(node_idx, 2, edge_index, relabel_nodes=True, num_nodes=N)

    return Built(
        call(f, ["node_idx", "edge_index"]),
        {"node_idx": torch.tensor([0, 3]), "edge_index": ei},
        {"edge_index": EDGES},
        flips={"other seeds": {"node_idx": torch.tensor([5, 7]), "edge_index": ei}},
    )


GROUPS = {"conv": convs, "model": models, "pool": pools, "aggr": aggregations, "utils": utils}


def entries() -> list[Entry]:
    return grouped("torch_geometric", GROUPS)
