# Prints what a terminal would act on (an escape sequence that clears the screen), a line longer
# than any screen, and more lines than anyone reads: kforge shows them labelled, made safe, cut.
import sys
import torch
import torch.nn as nn

sys.stdout.write("\x1b[2Jcleared the screen\n")
print("x" * 10000)
for i in range(500):
    print(f"line {i}", file=sys.stderr if i % 2 else sys.stdout)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


batch_size = 16
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
