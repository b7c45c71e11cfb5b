"""python3 -m gradwire.prepare_data ROOT: Debian's Fashion-MNIST
(dataset-fashion-mnist) written where torchvision's FashionMNIST(ROOT)
reads it, once, so that scripts that pass download=True train without a
network (gradwire.datasets.prepare_torchvision_fashion_mnist)."""

import sys

from gradwire.datasets import prepare_torchvision_fashion_mnist


def main(argv):
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python3 -m gradwire.prepare_data ROOT\n"
              "  writes Debian's Fashion-MNIST into ROOT/FashionMNIST/raw, "
              "where torchvision's FashionMNIST(ROOT) reads it",
              file=sys.stderr)
        return 2
    try:
        print(prepare_torchvision_fashion_mnist(argv[0]))
    except OSError as error:
        print(f"gradwire.prepare_data: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
