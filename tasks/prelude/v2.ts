# LibTorch 2.x: the builtins, so eager baselines are what PyTorch users run (a hand-written math
# version would become the baseline and inflate speedups).

def F_rms_norm(input: Tensor, normalized_shape: List[int], weight: Optional[Tensor] = None,
               eps: Optional[float] = None) -> Tensor:
    return torch.rms_norm(input, normalized_shape, weight, eps)

def F_scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                   attn_mask: Optional[Tensor] = None, dropout_p: float = 0.0,
                                   is_causal: bool = False, scale: Optional[float] = None) -> Tensor:
    assert dropout_p == 0.0, "kforge references are deterministic: dropout_p must be 0"
    return torch.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
                                              scale=scale)
