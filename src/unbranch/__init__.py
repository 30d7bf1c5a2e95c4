"""unbranch: rewrite Python control flow on tensors so that torch.export captures it."""

from .api import Report, RewrittenMethod, torch_export_rewrite, transform_method
from .cache import VERSION as __version__
from .errors import UnbranchError

__all__ = ["Report", "RewrittenMethod", "UnbranchError", "__version__", "torch_export_rewrite", "transform_method"]
