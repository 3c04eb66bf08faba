"""torch.nn leaf modules in functional form, and the initialisation of their parameters.

translate() gets the module, its call's arguments already rendered as TorchScript text, P (the
forward() argument name of a parameter or buffer, "None" for None) and V (a Python value as
TorchScript text), and returns the expression the module computes.
"""
import torch.nn as nn

from kb_load import Sym, Unconvertible, e_of


def _same(v, V):
    v = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    return V(v[0]) if all(x == v[0] for x in v) else V(list(v))


def _opts(pairs, V):
    """`, name=value` for each (name, value, default) whose value is not the default."""
    def norm(v):
        return tuple(v) if isinstance(v, (tuple, list)) else (v,)
    out = ""
    for k, v, default in pairs:
        vs, ds = norm(v), norm(default)
        if len(ds) == 1:
            ds = ds * len(vs)
        if vs != ds:
            out += f", {k}={_same(v, V) if isinstance(v, (tuple, list)) else V(v)}"
    return out


def _nd(m):
    return {"1d": 1, "2d": 2, "3d": 3}.get(type(m).__name__[-2:], 0)


def linear(m, a, P, V):
    return f"F.linear({a[0]}, {P(m.weight)}" + (f", {P(m.bias)})" if m.bias is not None else ")")


def conv(m, a, P, V):
    if m.padding_mode != "zeros":
        raise Unconvertible(f"nn.{type(m).__name__} with padding_mode='{m.padding_mode}' has no functional translation")
    n, x, w, b = _nd(m), a[0], P(m.weight), P(m.bias)
    if isinstance(m.padding, str):
        return f"torch.conv{n}d({x}, {w}, {b}, {V(list(m.stride))}, {V(m.padding)}, {V(list(m.dilation))}, {V(m.groups)})"
    return f"F.conv{n}d({x}, {w}, {b}" + _opts([("stride", m.stride, 1), ("padding", m.padding, 0),
                                                ("dilation", m.dilation, 1), ("groups", m.groups, 1)], V) + ")"


def conv_transpose(m, a, P, V):
    if len(a) > 1 or m.padding_mode != "zeros":
        raise Unconvertible(f"nn.{type(m).__name__} with output_size or a padding_mode has no functional translation")
    return f"F.conv_transpose{_nd(m)}d({a[0]}, {P(m.weight)}, {P(m.bias)}" + _opts(
        [("stride", m.stride, 1), ("padding", m.padding, 0), ("output_padding", m.output_padding, 0),
         ("groups", m.groups, 1), ("dilation", m.dilation, 1)], V) + ")"


def batch_norm(m, a, P, V):
    batch_stats = m.training or (m.running_mean is None and m.running_var is None)
    # With batch statistics the running ones are only updated (a side effect), never read.
    rm, rv = ("None", "None") if batch_stats else (P(m.running_mean), P(m.running_var))
    w, b = (P(m.weight), P(m.bias)) if m.affine else ("None", "None")
    return f"F.batch_norm({a[0]}, {rm}, {rv}, {w}, {b}, training={batch_stats}, eps={V(m.eps)})"


def instance_norm(m, a, P, V):
    input_stats = m.training or not m.track_running_stats
    rm, rv = ("None", "None") if input_stats else (P(m.running_mean), P(m.running_var))
    w, b = (P(m.weight), P(m.bias)) if m.affine else ("None", "None")
    return f"F.instance_norm({a[0]}, {rm}, {rv}, {w}, {b}, use_input_stats={input_stats}, eps={V(m.eps)})"


def layer_norm(m, a, P, V):
    w = P(m.weight) if m.elementwise_affine else "None"
    b = P(m.bias) if m.elementwise_affine and getattr(m, "bias", None) is not None else "None"
    return f"F.layer_norm({a[0]}, {V(list(m.normalized_shape))}, {w}, {b}, eps={V(m.eps)})"


def group_norm(m, a, P, V):
    w, b = (P(m.weight), P(m.bias)) if m.affine else ("None", "None")
    return f"F.group_norm({a[0]}, {V(m.num_groups)}, {w}, {b}, eps={V(m.eps)})"


def rms_norm(m, a, P, V):
    w = P(m.weight) if m.elementwise_affine else "None"
    return f"F.rms_norm({a[0]}, {V(list(m.normalized_shape))}, {w}, eps={V(m.eps)})"


def dropout(m, a, P, V):
    if m.p and m.training:
        raise Unconvertible(f"nn.{type(m).__name__}(p={m.p}) in training mode: the output is random")
    return a[0]


def softmax(fn):
    def f(m, a, P, V):
        if m.dim is None:
            raise Unconvertible(f"nn.{type(m).__name__} without dim (an implicit dim) has no functional translation")
        return f"{fn}({a[0]}, {V(m.dim)})" if fn != "softmin" else f"F.softmax(-{a[0]}, {V(m.dim)})"
    return f


def max_pool(m, a, P, V):
    if m.return_indices:
        raise Unconvertible(f"nn.{type(m).__name__}(return_indices=True) has no functional translation")
    return f"F.max_pool{_nd(m)}d({a[0]}, {_same(m.kernel_size, V)}" + _opts(
        [("stride", m.stride, m.kernel_size), ("padding", m.padding, 0), ("dilation", m.dilation, 1),
         ("ceil_mode", m.ceil_mode, False)], V) + ")"


def avg_pool(m, a, P, V):
    opts = [("stride", m.stride, m.kernel_size), ("padding", m.padding, 0), ("ceil_mode", m.ceil_mode, False),
            ("count_include_pad", m.count_include_pad, True)]
    if _nd(m) > 1:
        opts.append(("divisor_override", m.divisor_override, None))
    return f"F.avg_pool{_nd(m)}d({a[0]}, {_same(m.kernel_size, V)}" + _opts(opts, V) + ")"


def adaptive(kind):
    def f(m, a, P, V):
        size = m.output_size if isinstance(m.output_size, (tuple, list)) else (m.output_size,) * _nd(m)
        if any(s is None for s in size):
            raise Unconvertible(f"nn.{type(m).__name__} with a None output size has no functional translation")
        if kind == "avg" and _nd(m) < 3:
            return f"F.adaptive_avg_pool{_nd(m)}d({a[0]}, {_same(size, V)})"
        return f"torch.adaptive_{kind}_pool{_nd(m)}d({a[0]}, {V(list(size))})" + ("[0]" if kind == "max" else "")
    return f


def embedding(m, a, P, V):
    if m.max_norm is not None:
        raise Unconvertible("nn.Embedding(max_norm=...) renormalises its weight in place")
    return f"torch.embedding({P(m.weight)}, {a[0]}, {V(-1 if m.padding_idx is None else m.padding_idx)})"


def recurrent(m, a, P, V):
    """nn.LSTM, nn.GRU and nn.RNN as the aten op their forward() calls: torch.lstm returns
    (output, h_n, c_n), which kb_emit reads as the module's (output, (h_n, c_n))."""
    name = type(m).__name__
    if m.dropout and m.training and m.num_layers > 1:
        raise Unconvertible(f"nn.{name}(dropout={m.dropout}) in training mode: the output is random")
    if getattr(m, "proj_size", 0):
        raise Unconvertible(f"nn.{name} with proj_size has no functional translation in kforge's importer")
    if len(a) < 2 or a[1] == "None":
        raise Unconvertible(f"nn.{name} without an initial state has no functional translation in kforge's importer")
    op = {"LSTM": "torch.lstm", "GRU": "torch.gru"}.get(name) or f"torch.rnn_{m.nonlinearity}"
    weights = "[" + ", ".join(P(getattr(m, w)) for w in m._flat_weights_names) + "]"
    return (f"{op}({a[0]}, {a[1]}, {weights}, {V(bool(m.bias))}, {V(m.num_layers)}, {V(float(m.dropout))}, "
            f"{V(m.training)}, {V(m.bidirectional)}, {V(m.batch_first)})")


LOSS_DEFAULTS = {"reduction": "mean", "beta": 1.0, "delta": 1.0, "log_target": False, "margin": 1.0, "p": 2.0,
                 "eps": 1e-6, "swap": False, "ignore_index": -100, "label_smoothing": 0.0}


def loss(fn, extra=(), weights=()):
    """A loss module: its inputs, then its weight buffers (None when absent), then the options that
    are not the default (the prelude's F functions follow torch.nn.functional's signatures)."""
    def f(m, a, P, V):
        args = list(a) + [P(getattr(m, w, None)) for w in weights]
        while weights and args and args[-1] == "None":
            args.pop()
        opts = [(k, getattr(m, k)) for k in extra + ("reduction",)]
        text = ", ".join(args + [f"{k}={V(v)}" for k, v in opts if v != LOSS_DEFAULTS.get(k)])
        return f"{fn}({text})"
    return f


TABLE = {
    "Linear": linear, "Conv1d": conv, "Conv2d": conv, "Conv3d": conv,
    "ConvTranspose1d": conv_transpose, "ConvTranspose2d": conv_transpose, "ConvTranspose3d": conv_transpose,
    "BatchNorm1d": batch_norm, "BatchNorm2d": batch_norm, "BatchNorm3d": batch_norm,
    "InstanceNorm1d": instance_norm, "InstanceNorm2d": instance_norm, "InstanceNorm3d": instance_norm,
    "LayerNorm": layer_norm, "GroupNorm": group_norm, "RMSNorm": rms_norm,
    "Dropout": dropout, "Dropout1d": dropout, "Dropout2d": dropout, "Dropout3d": dropout, "AlphaDropout": dropout,
    "Identity": lambda m, a, P, V: a[0],
    "ReLU": lambda m, a, P, V: f"F.relu({a[0]})", "ReLU6": lambda m, a, P, V: f"F.relu6({a[0]})", "SiLU": lambda m, a, P, V: f"F.silu({a[0]})",
    "Sigmoid": lambda m, a, P, V: f"torch.sigmoid({a[0]})", "Tanh": lambda m, a, P, V: f"torch.tanh({a[0]})", "SELU": lambda m, a, P, V: f"F.selu({a[0]})",
    "Hardsigmoid": lambda m, a, P, V: f"F.hardsigmoid({a[0]})", "Hardswish": lambda m, a, P, V: f"F.hardswish({a[0]})",
    "Mish": lambda m, a, P, V: f"F.mish({a[0]})", "LogSigmoid": lambda m, a, P, V: f"F.logsigmoid({a[0]})", "Softsign": lambda m, a, P, V: f"F.softsign({a[0]})",
    "Tanhshrink": lambda m, a, P, V: f"{a[0]} - torch.tanh({a[0]})",
    "LeakyReLU": lambda m, a, P, V: f"F.leaky_relu({a[0]}, {V(float(m.negative_slope))})",
    "GELU": lambda m, a, P, V: f"F.gelu({a[0]})" if m.approximate == "none" else f"F.gelu({a[0]}, approximate={V(m.approximate)})",
    "Softplus": lambda m, a, P, V: f"F.softplus({a[0]}, {V(float(m.beta))}, {V(float(m.threshold))})",
    "ELU": lambda m, a, P, V: f"F.elu({a[0]}, {V(float(m.alpha))})", "CELU": lambda m, a, P, V: f"F.celu({a[0]}, {V(float(m.alpha))})",
    "Hardtanh": lambda m, a, P, V: f"F.hardtanh({a[0]}, {V(float(m.min_val))}, {V(float(m.max_val))})",
    "Softshrink": lambda m, a, P, V: f"torch.softshrink({a[0]}, {V(float(m.lambd))})", "Hardshrink": lambda m, a, P, V: f"torch.hardshrink({a[0]}, {V(float(m.lambd))})",
    "Threshold": lambda m, a, P, V: f"torch.threshold({a[0]}, {V(float(m.threshold))}, {V(float(m.value))})",
    "GLU": lambda m, a, P, V: f"torch.glu({a[0]}, {V(m.dim)})",
    "Softmax": softmax("F.softmax"), "LogSoftmax": softmax("F.log_softmax"), "Softmin": softmax("softmin"),
    "PReLU": lambda m, a, P, V: f"torch.prelu({a[0]}, {P(m.weight)})",
    "Flatten": lambda m, a, P, V: f"torch.flatten({a[0]}, {V(m.start_dim)}, {V(m.end_dim)})",
    "MaxPool1d": max_pool, "MaxPool2d": max_pool, "MaxPool3d": max_pool,
    "AvgPool1d": avg_pool, "AvgPool2d": avg_pool, "AvgPool3d": avg_pool,
    "AdaptiveAvgPool1d": adaptive("avg"), "AdaptiveAvgPool2d": adaptive("avg"), "AdaptiveAvgPool3d": adaptive("avg"),
    "AdaptiveMaxPool1d": adaptive("max"), "AdaptiveMaxPool2d": adaptive("max"), "AdaptiveMaxPool3d": adaptive("max"),
    "Embedding": embedding,
    "LSTM": recurrent, "GRU": recurrent, "RNN": recurrent,
    "PixelShuffle": lambda m, a, P, V: f"torch.pixel_shuffle({a[0]}, {V(m.upscale_factor)})",
    "ChannelShuffle": lambda m, a, P, V: f"torch.channel_shuffle({a[0]}, {V(m.groups)})",
    "ZeroPad1d": lambda m, a, P, V: f"torch.constant_pad_nd({a[0]}, {V(list(m.padding))}, 0.0)",
    "ZeroPad2d": lambda m, a, P, V: f"torch.constant_pad_nd({a[0]}, {V(list(m.padding))}, 0.0)",
    "ConstantPad1d": lambda m, a, P, V: f"torch.constant_pad_nd({a[0]}, {V(list(m.padding))}, {V(float(m.value))})",
    "ConstantPad2d": lambda m, a, P, V: f"torch.constant_pad_nd({a[0]}, {V(list(m.padding))}, {V(float(m.value))})",
    "ConstantPad3d": lambda m, a, P, V: f"torch.constant_pad_nd({a[0]}, {V(list(m.padding))}, {V(float(m.value))})",
    "MSELoss": loss("F.mse_loss"), "L1Loss": loss("F.l1_loss"), "SmoothL1Loss": loss("F.smooth_l1_loss", ("beta",)),
    "HuberLoss": loss("F.huber_loss", ("delta",)), "KLDivLoss": loss("F.kl_div", ("log_target",)),
    "HingeEmbeddingLoss": loss("F.hinge_embedding_loss", ("margin",)),
    "TripletMarginLoss": loss("F.triplet_margin_loss", ("margin", "p", "eps", "swap")),
    "CrossEntropyLoss": loss("F.cross_entropy", ("ignore_index", "label_smoothing"), ("weight",)),
    "NLLLoss": loss("F.nll_loss", ("ignore_index",), ("weight",)),
    "BCEWithLogitsLoss": lambda m, a, P, V: f"F.binary_cross_entropy_with_logits({a[0]}, {a[1]}, {P(m.weight)}, "
                                            f"reduction={V(m.reduction)}, pos_weight={P(m.pos_weight)})",
    "CosineSimilarity": lambda m, a, P, V: f"F.cosine_similarity({a[0]}, {a[1]}, {V(m.dim)}, {V(m.eps)})",
    "PairwiseDistance": lambda m, a, P, V: f"torch.pairwise_distance({a[0]}, {a[1]}, {V(m.norm)}, {V(m.eps)}, {V(m.keepdim)})",
}


def translate(mod, qual, args, kwargs, P, V):
    name = type(mod).__name__
    fn = TABLE.get(name) if type(mod).__module__.startswith("torch.nn") else None
    if fn is None:
        raise Unconvertible(f"nn.{name} ({qual}) has no functional translation in kforge's importer")
    if kwargs:
        raise Unconvertible(f"nn.{name} ({qual}) is called with keyword arguments ({', '.join(kwargs)})")
    try:
        return fn(mod, args, P, V)
    except IndexError:
        raise Unconvertible(f"nn.{name} ({qual}) is called with too few arguments")


def _fan_in(m, attr):
    """Fan-in of Linear/Conv/ConvTranspose (PyTorch's default init bound is 1/sqrt(fan_in) for
    weight and bias): a Sym or int."""
    if isinstance(m, nn.Linear):
        return m.in_features
    if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
        fan = m.in_channels // m.groups
    elif isinstance(m, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)):
        fan = m.out_channels // m.groups
    else:
        return None
    for k in m.kernel_size:
        fan = fan * k
    return fan


def layer_init(m, attr):
    """The default init of a Linear/Conv layer's weight or bias: ("uniform", [lo, hi]) with each
    bound a function of an int-expression renderer; None for other layers (their Draw is used)."""
    if attr not in ("weight", "bias"):
        return None
    fan = _fan_in(m, attr)
    if fan is None:
        return None
    e = e_of(fan) if isinstance(fan, (int, Sym)) else ("num", int(fan))
    return ("uniform", [lambda r: f"-1.0 / sqrt({r(e)})", lambda r: f"1.0 / sqrt({r(e)})"])
