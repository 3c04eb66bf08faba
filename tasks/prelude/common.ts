# kforge TorchScript prelude, shared by every LibTorch version.
# A task reference's `F.name(` and `torch.nn.functional.name(` become `F_name(`: each function here
# follows torch.nn.functional's signature (the deprecated size_average/reduce/inplace arguments
# are left out). Every F_ function is the way PyTorch itself computes it, so eager timings of a
# reference are the timings of what a PyTorch user runs.

def _kf_reduction(reduction: str) -> int:
    if reduction == 'none':
        return 0
    if reduction == 'sum':
        return 2
    assert reduction == 'mean', "reduction must be 'none', 'mean' or 'sum'"
    return 1

def _kf_n1(v: Union[int, List[int]]) -> List[int]:
    if isinstance(v, int):
        return [v]
    return v

def _kf_n2(v: Union[int, List[int]]) -> List[int]:
    if isinstance(v, int):
        return [v, v]
    return v

def _kf_n3(v: Union[int, List[int]]) -> List[int]:
    if isinstance(v, int):
        return [v, v, v]
    return v

def _kf_stride(stride: Optional[Union[int, List[int]]], n: int) -> List[int]:
    if stride is None:
        return []
    if isinstance(stride, int):
        return [stride for _ in range(n)]
    return stride

def F_relu(input: Tensor) -> Tensor:
    return torch.relu(input)

def F_relu6(input: Tensor) -> Tensor:
    return torch.hardtanh(input, 0.0, 6.0)

def F_leaky_relu(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    return torch.leaky_relu(input, negative_slope)

def F_gelu(input: Tensor, approximate: str = 'none') -> Tensor:
    return torch.gelu(input, approximate=approximate)

def F_silu(input: Tensor) -> Tensor:
    return torch.silu(input)

def F_sigmoid(input: Tensor) -> Tensor:
    return torch.sigmoid(input)

def F_tanh(input: Tensor) -> Tensor:
    return torch.tanh(input)

def F_softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    return torch.softplus(input, beta, threshold)

def F_elu(input: Tensor, alpha: float = 1.0) -> Tensor:
    return torch.elu(input, alpha)

def F_selu(input: Tensor) -> Tensor:
    return torch.selu(input)

def F_celu(input: Tensor, alpha: float = 1.0) -> Tensor:
    return torch.celu(input, alpha)

def F_hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    return torch.hardtanh(input, min_val, max_val)

def F_hardsigmoid(input: Tensor) -> Tensor:
    return torch.hardsigmoid(input)

def F_hardswish(input: Tensor) -> Tensor:
    return torch.hardswish(input)

def F_mish(input: Tensor) -> Tensor:
    return torch.mish(input)

def F_logsigmoid(input: Tensor) -> Tensor:
    return torch.log_sigmoid(input)

def F_softsign(input: Tensor) -> Tensor:
    return input / (input.abs() + 1)

def F_softmax(input: Tensor, dim: int) -> Tensor:
    return torch.softmax(input, dim)

def F_log_softmax(input: Tensor, dim: int) -> Tensor:
    return torch.log_softmax(input, dim)

def F_layer_norm(input: Tensor, normalized_shape: List[int], weight: Optional[Tensor] = None,
                 bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    return torch.layer_norm(input, normalized_shape, weight, bias, eps)

def F_group_norm(input: Tensor, num_groups: int, weight: Optional[Tensor] = None,
                 bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    return torch.group_norm(input, num_groups, weight, bias, eps)

def F_instance_norm(input: Tensor, running_mean: Optional[Tensor] = None,
                    running_var: Optional[Tensor] = None, weight: Optional[Tensor] = None,
                    bias: Optional[Tensor] = None, use_input_stats: bool = True,
                    momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    return torch.instance_norm(input, weight, bias, running_mean, running_var, use_input_stats,
                               momentum, eps, True)

def F_batch_norm(input: Tensor, running_mean: Optional[Tensor], running_var: Optional[Tensor],
                 weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
                 training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    return torch.batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
                            eps, True)

def F_normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    denom = torch.norm(input, p, [dim], True).clamp_min(eps).expand_as(input)
    return input / denom

def F_linear(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    return torch.linear(input, weight, bias)

def F_conv1d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
             stride: Union[int, List[int]] = 1, padding: Union[int, List[int]] = 0,
             dilation: Union[int, List[int]] = 1, groups: int = 1) -> Tensor:
    return torch.conv1d(input, weight, bias, _kf_n1(stride), _kf_n1(padding), _kf_n1(dilation), groups)

def F_conv2d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
             stride: Union[int, List[int]] = 1, padding: Union[int, List[int]] = 0,
             dilation: Union[int, List[int]] = 1, groups: int = 1) -> Tensor:
    return torch.conv2d(input, weight, bias, _kf_n2(stride), _kf_n2(padding), _kf_n2(dilation), groups)

def F_conv3d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
             stride: Union[int, List[int]] = 1, padding: Union[int, List[int]] = 0,
             dilation: Union[int, List[int]] = 1, groups: int = 1) -> Tensor:
    return torch.conv3d(input, weight, bias, _kf_n3(stride), _kf_n3(padding), _kf_n3(dilation), groups)

def F_conv_transpose1d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
                       stride: Union[int, List[int]] = 1, padding: Union[int, List[int]] = 0,
                       output_padding: Union[int, List[int]] = 0, groups: int = 1,
                       dilation: Union[int, List[int]] = 1) -> Tensor:
    return torch.conv_transpose1d(input, weight, bias, _kf_n1(stride), _kf_n1(padding),
                                  _kf_n1(output_padding), groups, _kf_n1(dilation))

def F_conv_transpose2d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
                       stride: Union[int, List[int]] = 1, padding: Union[int, List[int]] = 0,
                       output_padding: Union[int, List[int]] = 0, groups: int = 1,
                       dilation: Union[int, List[int]] = 1) -> Tensor:
    return torch.conv_transpose2d(input, weight, bias, _kf_n2(stride), _kf_n2(padding),
                                  _kf_n2(output_padding), groups, _kf_n2(dilation))

def F_conv_transpose3d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
                       stride: Union[int, List[int]] = 1, padding: Union[int, List[int]] = 0,
                       output_padding: Union[int, List[int]] = 0, groups: int = 1,
                       dilation: Union[int, List[int]] = 1) -> Tensor:
    return torch.conv_transpose3d(input, weight, bias, _kf_n3(stride), _kf_n3(padding),
                                  _kf_n3(output_padding), groups, _kf_n3(dilation))

def F_max_pool1d(input: Tensor, kernel_size: Union[int, List[int]],
                 stride: Optional[Union[int, List[int]]] = None, padding: Union[int, List[int]] = 0,
                 dilation: Union[int, List[int]] = 1, ceil_mode: bool = False) -> Tensor:
    return torch.max_pool1d(input, _kf_n1(kernel_size), _kf_stride(stride, 1), _kf_n1(padding),
                            _kf_n1(dilation), ceil_mode)

def F_max_pool2d(input: Tensor, kernel_size: Union[int, List[int]],
                 stride: Optional[Union[int, List[int]]] = None, padding: Union[int, List[int]] = 0,
                 dilation: Union[int, List[int]] = 1, ceil_mode: bool = False) -> Tensor:
    return torch.max_pool2d(input, _kf_n2(kernel_size), _kf_stride(stride, 2), _kf_n2(padding),
                            _kf_n2(dilation), ceil_mode)

def F_max_pool3d(input: Tensor, kernel_size: Union[int, List[int]],
                 stride: Optional[Union[int, List[int]]] = None, padding: Union[int, List[int]] = 0,
                 dilation: Union[int, List[int]] = 1, ceil_mode: bool = False) -> Tensor:
    return torch.max_pool3d(input, _kf_n3(kernel_size), _kf_stride(stride, 3), _kf_n3(padding),
                            _kf_n3(dilation), ceil_mode)

def F_avg_pool1d(input: Tensor, kernel_size: Union[int, List[int]],
                 stride: Optional[Union[int, List[int]]] = None, padding: Union[int, List[int]] = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    return torch.avg_pool1d(input, _kf_n1(kernel_size), _kf_stride(stride, 1), _kf_n1(padding),
                            ceil_mode, count_include_pad)

def F_avg_pool2d(input: Tensor, kernel_size: Union[int, List[int]],
                 stride: Optional[Union[int, List[int]]] = None, padding: Union[int, List[int]] = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: Optional[int] = None) -> Tensor:
    return torch.avg_pool2d(input, _kf_n2(kernel_size), _kf_stride(stride, 2), _kf_n2(padding),
                            ceil_mode, count_include_pad, divisor_override)

def F_avg_pool3d(input: Tensor, kernel_size: Union[int, List[int]],
                 stride: Optional[Union[int, List[int]]] = None, padding: Union[int, List[int]] = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: Optional[int] = None) -> Tensor:
    return torch.avg_pool3d(input, _kf_n3(kernel_size), _kf_stride(stride, 3), _kf_n3(padding),
                            ceil_mode, count_include_pad, divisor_override)

def F_adaptive_avg_pool1d(input: Tensor, output_size: Union[int, List[int]]) -> Tensor:
    return torch.adaptive_avg_pool1d(input, _kf_n1(output_size))

def F_adaptive_avg_pool2d(input: Tensor, output_size: Union[int, List[int]]) -> Tensor:
    return torch.adaptive_avg_pool2d(input, _kf_n2(output_size))

def F_mse_loss(input: Tensor, target: Tensor, reduction: str = 'mean') -> Tensor:
    return torch.mse_loss(input, target, _kf_reduction(reduction))

def F_l1_loss(input: Tensor, target: Tensor, reduction: str = 'mean') -> Tensor:
    return torch.l1_loss(input, target, _kf_reduction(reduction))

def F_smooth_l1_loss(input: Tensor, target: Tensor, reduction: str = 'mean',
                     beta: float = 1.0) -> Tensor:
    return torch.smooth_l1_loss(input, target, _kf_reduction(reduction), beta)

def F_huber_loss(input: Tensor, target: Tensor, reduction: str = 'mean',
                 delta: float = 1.0) -> Tensor:
    return torch.huber_loss(input, target, _kf_reduction(reduction), delta)

def F_kl_div(input: Tensor, target: Tensor, reduction: str = 'mean',
             log_target: bool = False) -> Tensor:
    if reduction == 'batchmean':
        return torch.kl_div(input, target, 2, log_target=log_target) / input.size(0)
    return torch.kl_div(input, target, _kf_reduction(reduction), log_target=log_target)

def F_cross_entropy(input: Tensor, target: Tensor, weight: Optional[Tensor] = None,
                    ignore_index: int = -100, reduction: str = 'mean',
                    label_smoothing: float = 0.0) -> Tensor:
    return torch.cross_entropy_loss(input, target, weight, _kf_reduction(reduction), ignore_index,
                                    label_smoothing)

def F_nll_loss(input: Tensor, target: Tensor, weight: Optional[Tensor] = None,
               ignore_index: int = -100, reduction: str = 'mean') -> Tensor:
    return torch.nll_loss_nd(input, target, weight, _kf_reduction(reduction), ignore_index)

def F_binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                       weight: Optional[Tensor] = None, reduction: str = 'mean',
                                       pos_weight: Optional[Tensor] = None) -> Tensor:
    return torch.binary_cross_entropy_with_logits(input, target, weight, pos_weight,
                                                  _kf_reduction(reduction))

def F_hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                           reduction: str = 'mean') -> Tensor:
    return torch.hinge_embedding_loss(input, target, margin, _kf_reduction(reduction))

def F_triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0,
                          p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                          reduction: str = 'mean') -> Tensor:
    return torch.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                     _kf_reduction(reduction))

def F_cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    return torch.cosine_similarity(x1, x2, dim, eps)
