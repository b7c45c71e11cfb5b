"""The models, their test accuracy and the weights' fingerprint.

cnn and mlp have gradwire-worker's layers, parameter names and order
(apps/fashion_mnist/models.h), so C++ and Python workers build equal
weights from equal seeds.
"""

import os
import sys
import threading

import torch
import torch.nn as nn
import torch.nn.functional as F

from .data import MASK64


class MlpNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(28 * 28, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class CnnNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(7 * 7 * 64, 1024)
        self.fc2 = nn.Linear(1024, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def resnet18():
    import torchvision  # only this model needs it
    net = torchvision.models.resnet18(num_classes=10)
    # 28x28 inputs: keep the resolution (3x3 stride 1, no max-pool).
    net.conv1 = nn.Conv2d(1, 64, kernel_size=3, stride=1, padding=1,
                          bias=False)
    nn.init.kaiming_normal_(net.conv1.weight, mode="fan_out",
                            nonlinearity="relu")
    net.maxpool = nn.Identity()
    return net


def make_model(name):
    return {"mlp": MlpNet, "cnn": CnnNet, "resnet18": resnet18}[name]()


def count_correct(model, images, labels, start, end, batch=100):
    correct = 0
    with torch.no_grad():
        for first in range(start, end, batch):
            last = min(first + batch, end)
            logits = model(images[first:last])
            correct += int((logits.argmax(1) == labels[first:last]).sum())
    return correct


def accuracy(model, images, labels, batch=100):
    """Fraction classified correctly, without autograd, on every core this
    process may use: one thread per core, each on its own slice with one
    intra-op thread (slices scale with the cores where torch's intra-op
    threads do not), as gradwire-worker's Accuracy (apps/fashion_mnist/trainer.cc)
    slices and batches. Training waits for the evaluation, so the cores the
    other workers trained on are free."""
    size = len(labels)
    if size == 0:
        return 0.0
    threads = max(1, min(len(os.sched_getaffinity(0)),
                         (size + batch - 1) // batch))
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    model.eval()
    correct = [0] * threads
    errors = []

    def run(t):
        try:
            correct[t] = count_correct(model, images, labels,
                                       size * t // threads,
                                       size * (t + 1) // threads, batch)
        except Exception as error:  # noqa: BLE001 - raised below
            errors.append(error)
    try:
        workers = [threading.Thread(target=run, args=(t,))
                   for t in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        model.train()
        torch.set_num_threads(saved)
    if errors:
        raise errors[0]
    return sum(correct) / size


def weights_fingerprint(named_parameters):
    """64-bit FNV-1a over names, shapes (int64) and float32 bytes, as 16 hex
    digits: WeightsFingerprint of apps/fashion_mnist/trainer.cc. Equal fingerprints
    mean bit-identical weights."""
    hash_value = 0xCBF29CE484222325

    def mix(data):
        nonlocal hash_value
        for byte in data:
            hash_value = ((hash_value ^ byte) * 0x100000001B3) & MASK64

    for name, tensor in named_parameters:
        values = tensor.detach().to("cpu", torch.float32).contiguous()
        mix(name.encode())
        for size in values.shape:
            mix(int(size).to_bytes(8, sys.byteorder, signed=True))
        mix(values.numpy().tobytes())
    return f"{hash_value:016x}"
