# unbranch rewrite of LongcatFlashExperts.forward (transformers.models.longcat_flash.modeling_longcat_flash); `unbranch emit` regenerates it
def forward(self, hidden_states, top_k_index, top_k_weights):
    final_hidden_states = torch.zeros_like(hidden_states)
    if top_k_index.numel() == 0:
        return final_hidden_states

    expert_mask = torch.nn.functional.one_hot(top_k_index, num_classes=self.total_experts).permute(2, 1, 0)

    expert_hit = range(self.total_experts)
    for expert_idx_tensor in range(self.total_experts):
        expert_idx = expert_idx_tensor
        selection_idx, token_idx = torch.where(expert_mask[expert_idx].squeeze(0))
        current_state = hidden_states[token_idx]

        def branch_cond_then_1(self, current_state, expert_idx):
            current_hidden_states = self.identity_expert(current_state)
            return current_hidden_states
        def branch_cond_else_1(self, current_state, expert_idx):
            gate, up = F.linear(current_state, _ub.select(self.gate_up_proj, expert_idx)).chunk(2, dim=-1)
            current_hidden_states = self.act_fn(gate) * up
            current_hidden_states = F.linear(current_hidden_states, _ub.select(self.down_proj, expert_idx))
            return current_hidden_states
        current_hidden_states = _ub.if_stmt(_ub.or_(expert_idx >= self.num_routed_experts, lambda: self.gate_up_proj is None), branch_cond_then_1, branch_cond_else_1, (self, current_state, expert_idx))

        current_hidden_states = current_hidden_states * top_k_weights[token_idx, selection_idx, None]
        final_hidden_states.index_add_(0, token_idx, current_hidden_states.to(hidden_states.dtype))
    return final_hidden_states
