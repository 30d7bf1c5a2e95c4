# unbranch rewrite of NllbMoeExperts.forward (transformers.models.nllb_moe.modeling_nllb_moe); `unbranch emit` regenerates it
def forward(self, hidden_states: torch.Tensor, router_mask: torch.Tensor, router_probs: torch.Tensor):
    final_hidden_states = torch.zeros_like(hidden_states)
    expert_mask = torch.nn.functional.one_hot(router_mask, num_classes=self.num_experts).permute(2, 1, 0)

    expert_hit = [[e] for e in range(self.num_experts)]
    for expert_idx in [[e] for e in range(self.num_experts)]:
        idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
        current_state = hidden_states[None, top_x].reshape(-1, hidden_states.shape[-1])
        current_hidden_states = self[f"expert_{expert_idx[0]}"](current_state) * router_probs[top_x, idx, None]
        if self.moe_token_dropout > 0:
            if self.training:
                current_hidden_states = self.token_dropout(current_hidden_states)
            else:
                current_hidden_states *= 1 - self.moe_token_dropout
        final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
    return final_hidden_states
