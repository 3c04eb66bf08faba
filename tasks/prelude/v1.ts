# LibTorch 1.x: no aten rms_norm or scaled_dot_product_attention, so these are written out the
# way PyTorch 2's own math fallbacks compute them.

def F_rms_norm(input: Tensor, normalized_shape: List[int], weight: Optional[Tensor] = None,
               eps: Optional[float] = None) -> Tensor:
    dims = [-(i + 1) for i in range(len(normalized_shape))]
    e = 1.1920928955078125e-07
    if eps is not None:
        e = eps
    y = input * torch.rsqrt(torch.mean(input * input, dims, True) + e)
    if weight is not None:
        y = y * weight
    return y

def F_scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                   attn_mask: Optional[Tensor] = None, dropout_p: float = 0.0,
                                   is_causal: bool = False, scale: Optional[float] = None) -> Tensor:
    assert dropout_p == 0.0, "kforge references are deterministic: dropout_p must be 0"
    s = float(query.size(-1)) ** -0.5
    if scale is not None:
        s = scale
    attn = torch.matmul(query, key.transpose(-2, -1)) * s
    if is_causal:
        upper = torch.triu(torch.ones_like(attn), 1) > 0.5
        attn = attn.masked_fill(upper, float('-inf'))
    if attn_mask is not None:
        if attn_mask.is_floating_point():
            attn = attn + attn_mask
        else:
            attn = attn.masked_fill(attn_mask.logical_not(), float('-inf'))
    return torch.matmul(torch.softmax(attn, -1), value)
