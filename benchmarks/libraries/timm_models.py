"""timm: a sample of every module (family file) of ``timm.list_models()``, the smallest models of each.

The sample is chosen from a census (``python -m benchmarks.libraries.timm_models``): every model
is built on the meta device (no memory, no time) to count its parameters; that is
``benchmarks/results/timm-census.json``. From each timm module (``resnet``, ``vision_transformer``,
``efficientnet``...), the smallest model of each name family (``vit``, ``deit``...) is taken, and
of those the :data:`PER_MODULE` smallest, under :data:`MAX_PARAMS` parameters.

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
PER_MODULE = 4
MAX_PARAMS = 60e6
SIDE = 64
NUM_CLASSES = 5


def family(name: str) -> str:
    """``vit_tiny_patch16_224`` -> ``vit``; ``resnet18d`` -> ``resnet``; ``efficientnet_b0`` -> ``efficientnet``."""
    return re.sub(r"\d.*$", "", name.split("_")[0]) or name


def sample(census: dict) -> list[str]:
    by_module: dict[str, dict[str, tuple]] = {}
    for name, info in census.items():
        if info.get("params") is None or info["params"] > MAX_PARAMS:
            continue
        smallest = by_module.setdefault(info["module"], {})
        key = family(name)
        if key not in smallest or (info["params"], name) < smallest[key]:
            smallest[key] = (info["params"], name)
    chosen = []
    for module in sorted(by_module):
        chosen += [name for _, name in sorted(by_module[module].values())[:PER_MODULE]]
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
