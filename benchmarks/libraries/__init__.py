"""The sweep over models of other libraries (torchvision, timm, diffusers, kornia): see benchmarks/README.md."""
