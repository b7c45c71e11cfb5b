"""Low-rank compression of gradient matrices (Compression("powersgd")), for
DistributedOptimizer and the DDP hook: as PowerSGD does, in two exchanges
a step (the default), or in one (`exchanges=1`).

A parameter of two or more dimensions is viewed as a matrix M, shape[0]
rows by the rest (as DDP's powerSGD_hook views it). With one exchange a
step it goes out as one rank-r factor a step, the two sides in turn
(ACP-SGD's alternation of PowerSGD's power iteration):

- a "right" step, with an orthonormal basis Q (m x r) that every worker
  holds, pushes P = M Q (n x r). The shards average the workers' P; the
  step's gradient is mean(P) Q^T, and mean(P), orthonormalized, is the
  next step's left basis;
- a "left" step, with that basis P (n x r), pushes Q = M^T P (m x r); the
  gradient is P mean(Q)^T, and mean(Q) orthonormalized the next right
  basis.

Each step projects every worker's gradient onto a basis they share, so the
mean of the workers' projections is the projection of their mean gradient:
the shards only average, and one exchange a step is enough, where
PowerSGD's hook needs two all-reduces (P, then Q). Error feedback keeps
what a worker's projection leaves out (M minus its own projection) and
adds it to the next gradient. The first right basis is random, drawn from
a fixed seed per matrix, the same on every worker; orthonormalizing is
deterministic on identical hardware, so the workers' bases stay equal.

With two exchanges a step (PowerSGD's own scheme, DDP's powerSGD_hook's
warm-started power iteration), both factors come from the step's own
gradient: each worker pushes P = M Q on the shared right basis Q; the
shards average; every worker orthonormalizes the mean into the left basis
P and pushes Q = M^T P; the shards average again; the step's gradient is
P mean(Q)^T, the projection of the workers' mean gradient on P's columns,
and mean(Q), orthonormalized, the next step's right basis. Error feedback
keeps M minus that mean projection. It sends what the hook sends, for two
round trips a step; the one-exchange form lags a step behind its basis,
which costs accuracy on adaptive optimizers (docs/convergence.md).

A worker keeps, per compressed matrix, its residual (one float32 per
element, as a sparsifier's), both bases and the registered factors
((n + m) r each), which the shards hold too. Tensors that a factor
would not shrink by half, or with fewer than dense_below elements, go
whole.
"""

import torch

#: Compression("powersgd")'s default rank: PowerSGD's paper's ResNet and
#: LSTM runs used 1 to 4 (docs/convergence.md measures the choice).
DEFAULT_RANK = 4
#: Compression("powersgd")'s default exchanges a step: PowerSGD's own
#: two, where DDP's hook lands on the GPT (12.46 held-out perplexity
#: against the hook's 12.48, and 16.84 for the one-exchange alternation;
#: docs/convergence.md).
DEFAULT_EXCHANGES = 2
#: The prefix of the registered factors' names.
FACTOR_PREFIX = "powersgd:"
# A matrix is compressed only where one rank-r factor of each side takes at
# most half its elements (DDP's powerSGD_hook's min_compression_rate).
_MIN_COMPRESSION_RATE = 2
# The seed of the first right bases.
_SEED = 0x9e3779b9


def matrix_shape(parameter, rank, dense_below):
    """(rows, columns) of the matrix that `parameter` is compressed as, or
    None where it goes whole: fewer than two dimensions or `dense_below`
    elements, or factors not half its size."""
    if parameter.dim() < 2 or parameter.numel() < max(dense_below, 1):
        return None
    rows = parameter.shape[0]
    columns = parameter.numel() // rows
    if rows * columns < _MIN_COMPRESSION_RATE * (rows + columns) * rank:
        return None
    return rows, columns


def orthonormalized(factor):
    """An orthonormal basis of `factor`'s columns (n x r, n >= r). A zero
    column (a matrix whose gradient was zero) still gets a unit vector, so
    the basis never holds NaN."""
    basis, _ = torch.linalg.qr(factor, mode="reduced")
    return basis


def _own(tensor, device):
    """A copy of a loaded state's `tensor` (or None) on `device`: the state
    may be another object's, still in use."""
    return None if tensor is None else tensor.to(device, copy=True)


class _Matrix:
    """One compressed parameter: where it sits and what a worker keeps."""

    def __init__(self, index, shape, rank, like):
        self.index = index
        self.rows, self.columns = shape
        self.rank = rank
        generator = torch.Generator().manual_seed(_SEED + index)
        start = torch.randn(self.columns, rank, generator=generator)
        self.right = orthonormalized(start).to(like.device)
        self.left = None
        self.residual = None
        # The residual before this step's compress(), where kept.
        self.kept = None

    def view(self, gradient):
        return gradient.reshape(self.rows, self.columns)

    def zero_factors(self):
        """Flat zero buffers for the factors: P (rows x r), Q (columns x
        r)."""
        device = self.right.device
        return (torch.zeros(self.rows * self.rank, device=device),
                torch.zeros(self.columns * self.rank, device=device))

    def project(self, gradient, left_side, out):
        """Adds `gradient` to the residual, writes this step's factor into
        `out` (flat: Q on a left step, P on a right one) and leaves in the
        residual what the projection does not carry."""
        if self.residual is None:
            self.residual = torch.zeros(self.rows, self.columns,
                                        device=gradient.device)
        self.residual.add_(self.view(gradient))
        if left_side:
            factor = self.residual.t().mm(self.left)
            self.residual.addmm_(self.left, factor.t(), alpha=-1.0)
        else:
            factor = self.residual.mm(self.right)
            self.residual.addmm_(factor, self.right.t(), alpha=-1.0)
        out.copy_(factor.view(-1))

    def keep(self):
        """Copies the residual before it changes (None while there is
        none), so that restore() can put it back."""
        if self.residual is None:
            self.kept = None
            return
        if self.kept is None:
            self.kept = torch.empty_like(self.residual)
        self.kept.copy_(self.residual)

    def restore(self):
        """Puts back keep()'s copy: the residual as it was before the
        step."""
        if self.kept is None:
            self.residual = None
        else:
            self.residual.copy_(self.kept)

    def add_gradient(self, gradient):
        """Two exchanges, before the first: adds `gradient` to the
        residual, which holds M (gradient plus backlog) until finish()."""
        if self.residual is None:
            self.residual = torch.zeros(self.rows, self.columns,
                                        device=gradient.device)
        self.residual.add_(self.view(gradient))

    def push_left(self, out):
        """Two exchanges, the first: P = M Q into `out` (flat)."""
        out.copy_(self.residual.mm(self.right).view(-1))

    def push_right(self, mean, out):
        """Two exchanges, the second: the workers' mean P `mean`,
        orthonormalized, becomes the left basis; Q = M^T P into `out`."""
        self.left = orthonormalized(mean.view(self.rows, self.rank))
        out.copy_(self.residual.t().mm(self.left).view(-1))

    def finish(self, mean, gradient):
        """Two exchanges, after the second: writes P mean(Q)^T into
        `gradient`, keeps M minus it in the residual, and turns mean(Q)
        into the next step's right basis."""
        factor = mean.view(self.columns, self.rank)
        approximation = self.left.mm(factor.t())
        self.residual.sub_(approximation)
        self.right = orthonormalized(factor)
        gradient.copy_(approximation.view_as(gradient))

    def expand(self, mean, left_side, gradient):
        """Writes the mean gradient's approximation, from the workers' mean
        factor `mean` (flat, project()'s side), into `gradient`, and turns
        the factor into the next step's basis of the other side."""
        if left_side:
            factor = mean.view(self.columns, self.rank)
            approximation = self.left.mm(factor.t())
            self.right = orthonormalized(factor)
        else:
            factor = mean.view(self.rows, self.rank)
            approximation = factor.mm(self.right.t())
            self.left = orthonormalized(factor)
        gradient.copy_(approximation.view_as(gradient))


class LowRank:
    """The low-rank compression of DistributedOptimizer's parameters.

    Args:
      named: (name, parameter) pairs, in registration order.
      rank: the factors' rank r (>= 1).
      dense_below: parameters with fewer elements go whole.
      dense_steps: the first steps go whole (no factor, no residual).
      error_feedback: keep what a projection leaves out for the next step.
      exchanges: 2 (P, then Q, from each step's gradient, as PowerSGD) or
        1 (the sides in turn, one exchange a step).
    """

    def __init__(self, named, rank, dense_below, dense_steps=0,
                 error_feedback=True, exchanges=DEFAULT_EXCHANGES):
        self.rank = rank
        self.exchanges = exchanges
        self._dense_steps = dense_steps
        self._error_feedback = error_feedback
        self._matrices = []
        for index, (name, p) in enumerate(named):
            shape = matrix_shape(p, rank, dense_below)
            if shape is not None:
                self._matrices.append((name, _Matrix(index, shape, rank, p)))
        # Whether the next compressed step pushes the left factor (M^T P).
        self._left_side = False
        # Two exchanges: whether the step's first one (P) is done.
        self._first_done = False
        # Whether compress() copies the residuals first (restore()).
        self.keep_residuals = False

    def factors(self):
        """(name, tensor) pairs to register after the other tensors: two
        zero factor buffers per compressed matrix, P and Q, which the
        shards average (uncompressed). A step pushes one of them; the
        other, all zero, costs no bytes."""
        return [(f"{FACTOR_PREFIX}{name}:{side}", buffer)
                for name, m in self._matrices
                for side, buffer in zip("PQ", m.zero_factors())]

    @property
    def compressed_indices(self):
        """The positions, among the parameters, of the compressed ones."""
        return [m.index for _, m in self._matrices]

    def _compresses(self, step):
        return bool(self._matrices) and step >= self._dense_steps

    @torch.no_grad()
    def compress(self, gradients, finite, step):
        """This worker's factors, P and Q of each compressed matrix in
        factors()' order (flat; this step's side holds the factor, the
        other zeros), with each compressed gradient zeroed (it goes out as
        its factor only). Before the dense steps' end the factors are zero
        and the gradients left whole. Where this worker's gradients are not
        `finite` the factors are zero and the residuals left alone (every
        worker skips the step)."""
        out = self._zero_factors()
        self._first_done = False
        if not self._compresses(step):
            return out
        for j, (_, m) in enumerate(self._matrices):
            gradient = gradients[m.index]
            if self.keep_residuals:
                m.keep()
            if finite and self.exchanges == 2:
                m.add_gradient(gradient)
                m.push_left(out[2 * j])
            elif finite:
                m.project(gradient, self._left_side,
                          out[2 * j + int(self._left_side)])
                self._drop_residual(m)
            gradient.zero_()
        return out

    def _zero_factors(self):
        return [buffer for _, m in self._matrices
                for buffer in m.zero_factors()]

    def _drop_residual(self, matrix):
        if not self._error_feedback:
            matrix.residual.zero_()

    @torch.no_grad()
    def expand(self, gradients, means, step):
        """After an exchange that every worker stepped (not skipped), from
        the workers' mean factors `means` (compress()'s order): writes each
        compressed matrix's mean gradient into `gradients` and returns
        None, or, with two exchanges after the first, returns the factors
        (Q, in the same order) to push in the step's second exchange,
        whose means come back through expand() again. Where a worker's
        gradients were not finite the step ends after the first exchange:
        each worker's residual then keeps that step's gradient (M)."""
        if not self._compresses(step):
            return None
        if self.exchanges == 2:
            return self._expand_two(gradients, means)
        side = int(self._left_side)
        for j, (_, m) in enumerate(self._matrices):
            m.expand(means[2 * j + side], self._left_side, gradients[m.index])
        self._left_side = not self._left_side
        return None

    def _expand_two(self, gradients, means):
        if not self._first_done:
            out = self._zero_factors()
            for j, (_, m) in enumerate(self._matrices):
                m.push_right(means[2 * j], out[2 * j + 1])
            self._first_done = True
            return out
        for j, (_, m) in enumerate(self._matrices):
            m.finish(means[2 * j + 1], gradients[m.index])
            self._drop_residual(m)
        self._first_done = False
        return None

    def restore_residuals(self):
        """After a step that every worker skipped: puts each residual back
        as it was before the step, where keep_residuals copied it. Returns
        how many matrices had no copy (their residuals keep that step's
        gradient, or what its projection left)."""
        if not self.keep_residuals:
            return len(self._matrices)
        for _, m in self._matrices:
            m.restore()
        return 0

    def residual_norm(self):
        """L2 norm of this worker's residuals."""
        squares = [float(m.residual.square().sum()) for _, m in self._matrices
                   if m.residual is not None]
        return sum(squares) ** 0.5

    def state_dict(self):
        """The residuals and bases, by matrix name, and the next side."""
        return {
            "left_side": self._left_side,
            "matrices": {name: {"residual": m.residual, "left": m.left,
                                "right": m.right}
                         for name, m in self._matrices},
        }

    def check_state(self, state):
        """Raises ValueError unless `state` is a state_dict() of these
        matrices."""
        saved = (state or {}).get("matrices")
        names = sorted(name for name, _ in self._matrices)
        if saved is None or sorted(saved) != names:
            raise ValueError(
                "state_dict: its powersgd state is for other matrices "
                f"({sorted(saved or [])}), not {names}")

    def load_state_dict(self, state):
        """Restores state_dict()'s result. Raises ValueError, changing
        nothing, for a state of other matrices."""
        self.check_state(state)
        saved = state["matrices"]
        for name, m in self._matrices:
            entry, device = saved[name], m.right.device
            m.residual, m.left, m.right = (_own(entry["residual"], device),
                                           _own(entry["left"], device),
                                           _own(entry["right"], device))
        self._left_side = bool(state["left_side"])


def low_rank_of(compression, named, exchange):
    """The LowRank of a DistributedOptimizer over `named` parameters, or
    None when `compression` is not powersgd. Raises ValueError when the
    `exchange` is not of gradients."""
    if not compression.is_low_rank:
        return None
    if exchange != "gradients":
        raise ValueError(
            f"exchange: powersgd compresses the gradients, not {exchange} "
            "(its mean gradient is the same on every worker, so any "
            "optimizer, Adam included, steps on it as under DDP)")
    return LowRank(named, compression.rank, compression.dense_below,
                   compression.options.get("dense_steps", 0),
                   compression.options.get("error_feedback", True),
                   compression.exchanges)
