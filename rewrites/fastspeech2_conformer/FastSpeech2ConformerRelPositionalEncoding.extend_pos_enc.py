# unbranch rewrite of FastSpeech2ConformerRelPositionalEncoding.extend_pos_enc (transformers.models.fastspeech2_conformer.modeling_fastspeech2_conformer); `unbranch emit` regenerates it
def extend_pos_enc(self, x, pos_enc=None):
    """Reset the positional encodings."""
    if pos_enc is not None and not torch.compiler.is_compiling():
        # self.pos_enc contains both positive and negative parts
        # the length of self.pos_enc is 2 * input_len - 1
        if pos_enc.size(1) >= x.size(1) * 2 - 1:
            if pos_enc.dtype != x.dtype or pos_enc.device != x.device:
                pos_enc = pos_enc.to(dtype=x.dtype, device=x.device)
            return pos_enc
    # Suppose `i` means to the position of query vector and `j` means the
    # position of key vector. We use position relative positions when keys
    # are to the left (i>j) and negative relative positions otherwise (i<j).
    pos_enc_positive = torch.zeros(x.size(1), self.embed_dim)
    pos_enc_negative = torch.zeros(x.size(1), self.embed_dim)
    position = torch.arange(0, x.size(1), dtype=torch.int64).float().unsqueeze(1)
    div_term = torch.exp(
        torch.arange(0, self.embed_dim, 2, dtype=torch.int64).float() * -(math.log(10000.0) / self.embed_dim)
    )
    pos_enc_positive[:, 0::2] = torch.sin(position * div_term)
    pos_enc_positive[:, 1::2] = torch.cos(position * div_term)
    pos_enc_negative[:, 0::2] = torch.sin(-1 * position * div_term)
    pos_enc_negative[:, 1::2] = torch.cos(-1 * position * div_term)

    # Reserve the order of positive indices and concat both positive and
    # negative indices. This is used to support the shifting trick
    # as in https://huggingface.co/papers/1901.02860
    pos_enc_positive = torch.flip(pos_enc_positive, [0]).unsqueeze(0)
    pos_enc_negative = pos_enc_negative[1:].unsqueeze(0)
    pos_enc = torch.cat([pos_enc_positive, pos_enc_negative], dim=1)
    return pos_enc.to(device=x.device, dtype=x.dtype)
