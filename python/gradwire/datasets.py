"""Fashion-MNIST, as Debian's ``dataset-fashion-mnist`` package installs it.

Pure Python (gzip and torch), so that the extension needs no data reader.
It gives what gradwire-worker's C++ reader
(apps/fashion_mnist/fashion_mnist.cc) gives, bit for bit: the same examples
in file order and the same normalisation.
"""

import gzip
import os

import torch

#: Where ``apt-get install dataset-fashion-mnist`` puts the files.
FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"

#: Per-pixel mean and standard deviation of the training set (pixels in
#: [0, 1]); float32, as the C++ reader uses them.
FASHION_MNIST_MEAN = 0.2860
FASHION_MNIST_STD = 0.3530

_IMAGES_MAGIC = 0x00000803  # unsigned bytes, 3 dimensions
_LABELS_MAGIC = 0x00000801  # unsigned bytes, 1 dimension
_ROWS = _COLS = 28
_CLASSES = 10
# Fashion-MNIST has 70000 examples: a larger count is a corrupt header, and
# refusing it keeps a bad file from asking for a huge allocation.
_MAX_EXAMPLES = 1000000
_INSTALL_HINT = ("install it with `apt-get install dataset-fashion-mnist` "
                 "(or scripts/install-deps.sh), or pass another data_dir")


class BadDataFile(OSError):
    """A data file that is truncated, corrupt or not in the expected format.

    An OSError, like gzip.BadGzipFile: callers handle every problem with the
    files in one place, and ValueError stays for bad arguments."""


def load_fashion_mnist(data_dir=FASHION_MNIST_DIR, train=True, limit=-1):
    """Reads the training set (60000 examples) or the test set (10000).

    Returns ``(images, labels)``: images ``[N, 1, 28, 28]`` float32,
    normalised as ``(pixel / 255 - FASHION_MNIST_MEAN) / FASHION_MNIST_STD``;
    labels ``[N]`` int64 in ``[0, 10)``. ``limit`` >= 0 keeps only the first
    ``limit`` examples (and reads only those); -1 keeps all.

    Raises FileNotFoundError when the folder or a file is missing,
    BadDataFile (an OSError) for a corrupt file, ValueError for a bad
    ``limit``; every message names the file.
    """
    if limit < -1:
        raise ValueError(
            f"Fashion-MNIST limit must be -1 (all) or >= 0, got {limit}")
    prefix = os.path.join(data_dir, "train" if train else "t10k")
    images_path = prefix + "-images-idx3-ubyte.gz"
    labels_path = prefix + "-labels-idx1-ubyte.gz"
    if not os.path.isdir(data_dir):
        raise FileNotFoundError(
            f"Fashion-MNIST not found in {data_dir}: {_INSTALL_HINT}")
    for path in (images_path, labels_path):
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"Fashion-MNIST file {path} is missing: {_INSTALL_HINT}")
    with gzip.open(images_path, "rb") as images_file, \
            gzip.open(labels_path, "rb") as labels_file:
        count, rows, cols = _read_header(images_file, images_path,
                                         _IMAGES_MAGIC, 3)
        if (rows, cols) != (_ROWS, _COLS):
            raise BadDataFile(
                f"{images_path}: images are {rows}x{cols}, expected 28x28")
        (label_count,) = _read_header(labels_file, labels_path,
                                      _LABELS_MAGIC, 1)
        if count != label_count:
            raise BadDataFile(
                f"{images_path} holds {count} images but {labels_path} "
                f"holds {label_count} labels")
        n = count if limit < 0 else min(limit, count)
        pixels = _read_exact(images_file, images_path, n * rows * cols,
                             f"{n} images")
        classes = _read_exact(labels_file, labels_path, n, f"{n} labels")
        if n == count:
            _expect_end(images_file, images_path)
            _expect_end(labels_file, labels_path)
    return _normalise(pixels, n), _labels(classes, labels_path)


def _read_exact(file, path, size, what):
    try:
        data = file.read(size)
    except (OSError, EOFError) as error:  # gzip.BadGzipFile is an OSError
        raise BadDataFile(f"{path}: corrupt while reading {what}: {error}")
    if len(data) != size:
        raise BadDataFile(f"{path}: truncated: read {len(data)} of the {size} "
                         f"bytes of {what}")
    return data


def _read_header(file, path, magic, dims):
    """The IDX header: the magic number, then `dims` big-endian counts."""
    data = _read_exact(file, path, 4 * (1 + dims), "the IDX header")
    words = [int.from_bytes(data[i:i + 4], "big")
             for i in range(0, len(data), 4)]
    if words[0] != magic:
        kind = "an images" if magic == _IMAGES_MAGIC else "a labels"
        raise BadDataFile(f"{path}: IDX magic number is 0x{words[0]:08x}, "
                         f"expected 0x{magic:08x} ({kind} file)")
    if words[1] > _MAX_EXAMPLES:
        raise BadDataFile(f"{path}: implausible example count {words[1]} "
                         f"(more than {_MAX_EXAMPLES})")
    return words[1:]


def _expect_end(file, path):
    try:
        extra = file.read(1)
    except (OSError, EOFError) as error:
        raise BadDataFile(f"{path}: corrupt after the last example: {error}")
    if extra:
        raise BadDataFile(f"{path}: trailing bytes after the last example")


def _as_uint8(data):
    # torch.frombuffer refuses an empty buffer (limit=0).
    if not data:
        return torch.empty(0, dtype=torch.uint8)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def _normalise(pixels, n):
    # float32 throughout, in the C++ reader's order of operations, so the
    # values are the same bits.
    images = _as_uint8(pixels)
    images = images.to(torch.float32).div_(255.0)
    images.sub_(FASHION_MNIST_MEAN).div_(FASHION_MNIST_STD)
    return images.view(n, 1, _ROWS, _COLS)


def _labels(classes, path):
    labels = _as_uint8(classes)
    bad = (labels >= _CLASSES).nonzero()
    if len(bad):
        index = int(bad[0])
        raise BadDataFile(f"{path}: label {int(labels[index])} of example "
                         f"{index} is outside [0, 10)")
    return labels.to(torch.int64)


#: The files of torchvision's FashionMNIST(root) in root/FashionMNIST/raw.
_TORCHVISION_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                      "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def prepare_torchvision_fashion_mnist(root, data_dir=FASHION_MNIST_DIR):
    """Writes Debian's Fashion-MNIST where torchvision's
    ``FashionMNIST(root)`` reads it (uncompressed, in
    ``root/FashionMNIST/raw``), so that a script's ``download=True`` finds
    it there and downloads nothing. Files already there with the expected
    size are left alone. Returns the raw folder.

    Raises FileNotFoundError naming the Debian package when a source file
    is missing; BadDataFile for one whose size is not Fashion-MNIST's.
    """
    raw = os.path.join(root, "FashionMNIST", "raw")
    os.makedirs(raw, exist_ok=True)
    for name in _TORCHVISION_FILES:
        source = os.path.join(data_dir, name + ".gz")
        if not os.path.isfile(source):
            raise FileNotFoundError(
                f"Fashion-MNIST file {source} is missing: {_INSTALL_HINT}")
        count = 60000 if name.startswith("train") else 10000
        size = (16 + count * _ROWS * _COLS if "images" in name else
                8 + count)
        target = os.path.join(raw, name)
        if os.path.isfile(target) and os.path.getsize(target) == size:
            continue
        with gzip.open(source, "rb") as compressed:
            data = compressed.read()
        if len(data) != size:
            raise BadDataFile(f"{source}: {len(data)} bytes uncompressed, "
                              f"expected {size}")
        partial = target + ".partial"
        with open(partial, "wb") as out:
            out.write(data)
        os.replace(partial, target)
    return raw

