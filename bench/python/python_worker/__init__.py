"""bench/python/worker.py in modules: the Python worker of the benchmarks
and tests, which trains Fashion-MNIST as gradwire-worker does.

    flags     the command line (gradwire-worker's flags)
    data      this worker's part of the data, in gradwire-worker's order
    models    the models, test accuracy, the weights' fingerprint
    exchange  ParameterSync, DistributedOptimizer or DDP
    progress  the progress bar or lines
    training  the training loop, the summary, one whole run

Every module imports gradwire, so worker.py imports this package only
after it has checked that gradwire can be imported.
"""
