# unbranch rewrite of NllbMoeTop2Router.forward (transformers.models.nllb_moe.modeling_nllb_moe); `unbranch emit` regenerates it
def forward(self, hidden_states: torch.Tensor, padding_mask: torch.LongTensor | None = None) -> tuple:
    r"""
    The hidden states are reshaped to simplify the computation of the router probabilities (combining weights for
    each experts.)

    Args:
        hidden_states (`torch.Tensor`):
            (batch_size, sequence_length, hidden_dim) from which router probabilities are computed.
    Returns:
        top_1_mask (`torch.Tensor` of shape (batch_size, sequence_length)):
            Index tensor of shape [batch_size, sequence_length] corresponding to the expert selected for each token
            using the top1 probabilities of the router.
        router_probabilities (`torch.Tensor` of shape (batch_size, sequence_length, nump_experts)):
            Tensor of shape (batch_size, sequence_length, num_experts) corresponding to the probabilities for each
            token and expert. Used for routing tokens to experts.
        router_logits (`torch.Tensor` of shape (batch_size, sequence_length))):
            Logits tensor of shape (batch_size, sequence_length, num_experts) corresponding to raw router logits.
            This is used later for computing router z-loss.
    """
    self.input_dtype = hidden_states.dtype
    hidden_states = hidden_states.to(self.dtype)
    self._cast_classifier()
    router_logits = (self.classifier(hidden_states) if self.classifier.weight.dtype == self.dtype else torch.nn.functional.linear(hidden_states, self.classifier.weight.to(self.dtype), None if self.classifier.bias is None else self.classifier.bias.to(self.dtype)))
    top_1_mask, router_probs = self.route_tokens(router_logits, self.input_dtype, padding_mask)
    return top_1_mask, router_probs, router_logits
