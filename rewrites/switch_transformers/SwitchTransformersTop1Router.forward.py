# unbranch rewrite of SwitchTransformersTop1Router.forward (transformers.models.switch_transformers.modeling_switch_transformers); `unbranch emit` regenerates it
def forward(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""
    Computes router probabilities from input hidden states.

    Args:
        hidden_states (`torch.Tensor`):
            (batch_size, sequence_length, hidden_dim) from which router probabilities are computed.
    Returns:
        expert_index (`torch.Tensor`):
            One-hot dispatch mask of shape (batch_size, sequence_length, num_experts) with tokens routed to an
            expert beyond its capacity masked out.
        router_probs (`torch.Tensor`):
            Tensor of shape (batch_size, sequence_length, 1) with the probability of the selected expert for each
            token. Used to scale the expert outputs.
        router_logits (`torch.Tensor`):
            Logits tensor of shape (batch_size, sequence_length, num_experts) corresponding to raw router logits.
            This is used later for computing router z-loss.
    """
    # float32 is used to ensure stability. See the discussion of "selective precision" in
    # https://huggingface.co/papers/2101.03961.
    # We also store the previous dtype to cast back the output to the previous dtype
    self.input_dtype = hidden_states.dtype
    hidden_states = hidden_states.to(self.dtype)
    if self.training and self.jitter_noise > 0:
        # Multiply the token inputs by the uniform distribution - adding some noise
        hidden_states *= torch.empty_like(hidden_states).uniform_(1.0 - self.jitter_noise, 1.0 + self.jitter_noise)
    if self.classifier.weight.dtype != self.dtype and not torch.compiler.is_compiling():
        self.classifier = self.classifier.to(self.dtype)
    router_logits = (self.classifier(hidden_states) if self.classifier.weight.dtype == self.dtype else torch.nn.functional.linear(hidden_states, self.classifier.weight.to(self.dtype), None if self.classifier.bias is None else self.classifier.bias.to(self.dtype)))

    # Apply Softmax and cast back to the original `dtype`
    router_probs = nn.functional.softmax(router_logits, dim=-1, dtype=self.dtype).to(self.input_dtype)
    expert_index = torch.argmax(router_probs, dim=-1)
    expert_index = torch.nn.functional.one_hot(expert_index, num_classes=self.num_experts)
    token_priority = torch.cumsum(expert_index, dim=-2)
    # mask if the token routed to the expert will overflow
    expert_capacity_mask = token_priority <= self.expert_capacity
    expert_index = expert_index * expert_capacity_mask
    router_probs = torch.max(router_probs, dim=-1).values.unsqueeze(-1)
    return expert_index, router_probs, router_logits
