import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A two-layer LSTM from a given state, then a GRU over its outputs from the LSTM's final hidden
    state; returns the GRU's outputs and the LSTM's final cell state.
    """

    def __init__(self, input_size, hidden_size, num_layers):
        super(Model, self).__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)
        self.gru = nn.GRU(hidden_size, hidden_size, num_layers, batch_first=True)

    def forward(self, x, h0, c0):
        out, (h, c) = self.lstm(x, (h0, c0))
        out, _ = self.gru(out, h)
        return out, c


batch_size = 3
seq_len = 5
input_size = 4
hidden_size = 8
num_layers = 2


def get_inputs():
    return [torch.randn(batch_size, seq_len, input_size), torch.randn(num_layers, batch_size, hidden_size),
            torch.randn(num_layers, batch_size, hidden_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_layers]
