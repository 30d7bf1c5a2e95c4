"""timm: a sample of every module (family file) of ``timm.list_models()``, the smallest models of each.

The sample is chosen from a census (``python -m benchmarks.libraries.timm_models``): every model
is built on the meta device (no memory, no time) to count its parameters; that is
``benchmarks/results/timm-census.json``. Of the models under :data:`MAX_PARAMS` parameters, each
timm module (``resnet``, ``vision_transformer``, ``efficientnet``...) gives up to
:data:`PER_MODULE`: the smallest of each name family (``vit``, ``deit``...), then the second
smallest of each, and so on (at most :data:`PER_FAMILY` per family).

Each model is built with ``pretrained=False, num_classes=5`` on a 64x64 image; a model that
cannot take it is built again with ``img_size=64``, then at the input size of its config.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys

import torch

from .harness import BATCH, Built, Entry, space

CENSUS = os.path.join(os.path.dirname(__file__), "..", "results", "timm-census.json")
PER_MODULE = 8
PER_FAMILY = 4
MAX_PARAMS = 30e6
SIDE = 64
NUM_CLASSES = 5


def family(name: str) -> str:
    """``vit_tiny_patch16_224`` -> ``vit``; ``resnet18d`` -> ``resnet``; ``efficientnet_b0`` -> ``efficientnet``."""
    return re.sub(r"\d.*$", "", name.split("_")[0]) or name


def sample(census: dict) -> list[str]:
    """Per module, families in turn (each its smallest model first), up to PER_MODULE models."""
    by_module: dict[str, dict[str, list]] = {}
    for name, info in census.items():
        if info.get("params") is not None and info["params"] <= MAX_PARAMS:
            by_module.setdefault(info["module"], {}).setdefault(family(name), []).append((info["params"], name))
    chosen = []
    for module in sorted(by_module):
        families = sorted(sorted(models)[:PER_FAMILY] for models in by_module[module].values())
        picked = []
        for rank in range(PER_FAMILY):
            picked += [models[rank][1] for models in families if rank < len(models)]
        chosen += picked[:PER_MODULE]
    return chosen


def _works(model, side: int) -> bool:
    try:
        with torch.no_grad():
            model.eval()(torch.rand(1, 3, side, side))
        return True
    except Exception:
        return False


def build(name: str) -> Built:
    import timm

    model = timm.create_model(name, pretrained=False, num_classes=NUM_CLASSES)
    side = SIDE
    if not _works(model, side):
        try:
            model = timm.create_model(name, pretrained=False, num_classes=NUM_CLASSES, img_size=side)
        except TypeError:  # no img_size: its own input size
            side = model.pretrained_cfg.get("input_size", (3, 224, 224))[-1]
        else:
            if not _works(model, side):
                model = timm.create_model(name, pretrained=False, num_classes=NUM_CLASSES)
                side = model.pretrained_cfg.get("input_size", (3, 224, 224))[-1]
    torch.manual_seed(0)
    x = torch.rand(2, 3, side, side)
    return Built(model, {"x": x}, {"x": {0: BATCH, 2: space(32), 3: space(32)}})


def entries() -> list[Entry]:
    with open(CENSUS) as f:
        census = json.load(f)["models"]
    return [Entry(name, "timm", functools.partial(build, name)) for name in sample(census)]


def census() -> dict:
    """Every timm model built on the meta device: its module and parameter count (or why it did not build)."""
    import timm
    from timm.models import _registry

    out = {}
    for name in timm.list_models():
        info = {"module": _registry._model_to_module.get(name, "?")}
        try:
            with torch.device("meta"):
                model = timm.create_model(name, pretrained=False, num_classes=NUM_CLASSES)
            info["params"] = sum(p.numel() for p in model.parameters())
        except Exception as e:
            info["params"], info["error"] = None, f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        out[name] = info
    return out


if __name__ == "__main__":
    from . import tv_ops

    tv_ops.install()
    import timm

    models = census()
    with open(CENSUS, "w") as f:
        json.dump({"timm": timm.__version__, "torch": torch.__version__, "models": models}, f, indent=1)
    print(f"{len(models)} models, {len(sample(models))} in the sample", file=sys.stderr)
