# unbranch rewrite of SwitchTransformersExperts.forward (transformers.models.switch_transformers.modeling_switch_transformers); `unbranch emit` regenerates it
def forward(
    self, hidden_states: torch.Tensor, selected_experts: torch.Tensor, routing_weights: torch.Tensor
) -> torch.Tensor:
    final_hidden_states = torch.zeros_like(hidden_states)
    expert_mask = selected_experts.permute(2, 1, 0)

    expert_hit = [[e] for e in range(self.num_experts)]
    for expert_idx in [[e] for e in range(self.num_experts)]:
        idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
        current_state = hidden_states[None, top_x].reshape(-1, hidden_states.shape[-1])
        current_hidden_states = self[f"expert_{expert_idx[0]}"](current_state) * routing_weights[top_x, idx, None]
        final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
    return final_hidden_states
