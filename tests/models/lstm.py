"""A two-layer LSTM whose last hidden state is added to a projection of its last output step: the
LSTM's result is a nested tuple, (output, (h_n, c_n)), which the chain's task returns flat and
kforge model check nests again, and the projection's chain reads items of it (output and h_n)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.LSTM over a batch of sequences; the last layer's final hidden state plus a Linear of the
    last step's output."""

    def __init__(self, input_size, hidden_size, num_layers):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_size, hidden_size)

    def forward(self, x, h0, c0):
        out, state = self.lstm(x, (h0, c0))
        return state[0][-1] + self.fc(out[:, -1, :])


batch_size = 4
sequence_length = 16
input_size = 32
hidden_size = 48
num_layers = 2


def get_inputs():
    return [torch.randn(batch_size, sequence_length, input_size),
            torch.randn(num_layers, batch_size, hidden_size),
            torch.randn(num_layers, batch_size, hidden_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_layers]
