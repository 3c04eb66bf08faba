import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Two Transformer encoder layers (batch first, GELU, pre-normalisation) with a final
    LayerNorm, followed by self-attention pooling with nn.MultiheadAttention.
    """

    def __init__(self, d_model, nhead, dim_feedforward):
        super(Model, self).__init__()
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(d_model))
        self.pool = nn.MultiheadAttention(d_model, nhead, batch_first=True)

    def forward(self, x):
        x = self.encoder(x)
        pooled, _ = self.pool(x, x, x)
        return pooled.mean(dim=1)


batch_size = 4
seq_len = 10
d_model = 32
nhead = 4
dim_feedforward = 64


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model)]


def get_init_inputs():
    return [d_model, nhead, dim_feedforward]
