import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Cross-entropy loss of logits against integer class targets (a scalar).
    """

    def __init__(self):
        super(Model, self).__init__()
        self.loss = nn.CrossEntropyLoss()

    def forward(self, predictions, targets):
        return self.loss(predictions, targets)


batch_size = 512
num_classes = 100


def get_inputs():
    return [torch.randn(batch_size, num_classes), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
