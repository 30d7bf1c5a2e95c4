"""A stand-in for a third-party library (torchvision's ops, a diffusers scheduler): code outside
the model's own module that branches on tensor values, which unbranch must find and rewrite."""
