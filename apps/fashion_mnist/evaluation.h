// Test accuracy of a Fashion-MNIST classifier, measured on every core this
// process may run on.
#ifndef GRADWIRE_APPS_FASHION_MNIST_EVALUATION_H_
#define GRADWIRE_APPS_FASHION_MNIST_EVALUATION_H_

#include <cstdint>

#include "apps/fashion_mnist/fashion_mnist.h"
#include "apps/fashion_mnist/models.h"

namespace gradwire {

// Fraction of `data` that `model` classifies correctly, in forward passes
// of at most `batch` (> 0) examples, without autograd; 0 for empty data.
// Puts `model` in eval mode and back in train mode, and sets torch's
// intra-op threads to 1 while it runs (restored after): the caller must
// not train or evaluate `model` on another thread meanwhile. Throws what
// libtorch throws (Train catches it).
double Accuracy(Classifier& model, const Dataset& data, int64_t batch);

}  // namespace gradwire

#endif  // GRADWIRE_APPS_FASHION_MNIST_EVALUATION_H_
