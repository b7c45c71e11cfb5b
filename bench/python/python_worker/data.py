"""This worker's part of Fashion-MNIST, in gradwire-worker's order."""

import gradwire
import torch

MASK64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


class Mt19937_64:
    """std::mt19937_64, so that batch orders equal gradwire-worker's."""

    def __init__(self, seed):
        self._state = [seed & MASK64]
        for i in range(1, 312):
            previous = self._state[-1]
            self._state.append(
                (6364136223846793005 * (previous ^ (previous >> 62)) + i)
                & MASK64)
        self._index = 312

    def _twist(self):
        state = self._state
        for i in range(312):
            x = (state[i] & 0xFFFFFFFF80000000) | (
                state[(i + 1) % 312] & 0x7FFFFFFF)
            x_a = x >> 1
            if x & 1:
                x_a ^= 0xB5026F5AA96619E9
            state[i] = state[(i + 156) % 312] ^ x_a
        self._index = 0

    def __call__(self):
        if self._index >= 312:
            self._twist()
        x = self._state[self._index]
        self._index += 1
        x ^= (x >> 29) & 0x5555555555555555
        x ^= (x << 17) & 0x71D67FFFEDA60000
        x ^= (x << 37) & 0xFFF7EEE000000000
        x ^= x >> 43
        return x & MASK64


def uniform_below(rng, bound):
    """Uniform in [0, bound) by rejection, as gradwire-worker draws it."""
    reject_from = MASK64 - (MASK64 % bound + 1) % bound
    while True:
        x = rng()
        if x <= reject_from:
            return x % bound


def epoch_batches(num_examples, batch_size, seed, epoch):
    """The epoch's full batches (index tensors): BatchOrder::Batches of
    apps/fashion_mnist/fashion_mnist.cc with drop_last, a Fisher-Yates shuffle seeded
    from (seed, epoch) only. A script of your own can use
    torch.utils.data.DistributedSampler instead; this one follows
    gradwire-worker so that the two can be compared bit for bit."""
    rng = Mt19937_64(splitmix64(splitmix64(seed & MASK64) ^ epoch))
    order = list(range(num_examples))
    for i in range(num_examples - 1, 0, -1):
        j = uniform_below(rng, i + 1)
        order[i], order[j] = order[j], order[i]
    order = torch.tensor(order, dtype=torch.int64)
    return list(order[:num_examples // batch_size * batch_size]
                .split(batch_size))


class TrainingData:
    """This process's part of the training set (every parts-th example,
    from its own offset), the whole test set, and the steps per epoch that
    every worker takes: the smallest part's full batches."""

    def __init__(self, args):
        images, labels = gradwire.datasets.load_fashion_mnist(
            args.data_dir, True, args.train_limit or -1)
        self.test_images, self.test_labels = gradwire.datasets.load_fashion_mnist(
            args.data_dir, False, args.test_limit or -1)
        self.part = args.worker_id * args.local_size + args.local_rank
        parts = args.num_workers * args.local_size
        self.images = images[self.part::parts].contiguous()
        self.labels = labels[self.part::parts].contiguous()
        self.steps_per_epoch = (len(labels) // parts) // args.batch_size
        if self.steps_per_epoch == 0:
            raise ValueError(
                f"{len(labels)} training examples over {parts} processes do "
                f"not fill one batch of {args.batch_size}")
