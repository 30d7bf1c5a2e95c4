# unbranch rewrite of NllbMoeTop2Router._cast_classifier (transformers.models.nllb_moe.modeling_nllb_moe); `unbranch emit` regenerates it
def _cast_classifier(self):
    r"""
    `bitsandbytes` `Linear8bitLt` layers does not support manual casting Therefore we need to check if they are an
    instance of the `Linear8bitLt` class by checking special attributes.
    """
    if not (hasattr(self.classifier, "SCB") or hasattr(self.classifier, "CB")):
        if self.classifier.weight.dtype != self.dtype and not torch.compiler.is_compiling():
            self.classifier = self.classifier.to(self.dtype)
