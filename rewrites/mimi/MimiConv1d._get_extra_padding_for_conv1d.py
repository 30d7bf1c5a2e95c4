# unbranch rewrite of MimiConv1d._get_extra_padding_for_conv1d (transformers.models.mimi.modeling_mimi); `unbranch emit` regenerates it
def _get_extra_padding_for_conv1d(
    self,
    hidden_states: torch.Tensor,
) -> torch.Tensor:
    """See `pad_for_conv1d`."""
    length = hidden_states.shape[-1]
    n_frames = (length - ((self.conv.kernel_size[0] - 1) * self.conv.dilation[0] + 1) + (((self.conv.kernel_size[0] - 1) * self.conv.dilation[0] + 1) - self.conv.stride[0])) / self.conv.stride[0] + 1
    n_frames = math.ceil(n_frames) - 1
    ideal_length = n_frames * self.conv.stride[0] + ((self.conv.kernel_size[0] - 1) * self.conv.dilation[0] + 1) - (((self.conv.kernel_size[0] - 1) * self.conv.dilation[0] + 1) - self.conv.stride[0])

    return ideal_length - length
