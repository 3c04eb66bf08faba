import torch
import torch.nn as nn


class Model(nn.Module):
    """
    An Elman cell run over every time step of a long sequence in a Python loop, collecting the
    output of each step: traced, the loop is unrolled into one copy per step.
    """

    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.to_hidden = nn.Linear(input_size + hidden_size, hidden_size)
        self.to_output = nn.Linear(hidden_size, output_size)

    def forward(self, x, h0):
        steps = x.size(0)
        h = h0
        outs = []
        for i in range(steps):
            h = torch.tanh(self.to_hidden(torch.cat((x[i], h), dim=1)))
            outs.append(self.to_output(h))
        return torch.stack(outs, dim=0)


steps = 300
batch_size = 4
input_size = 16
hidden_size = 16
output_size = 8


def get_inputs():
    return [torch.rand(steps, batch_size, input_size), torch.rand(batch_size, hidden_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
