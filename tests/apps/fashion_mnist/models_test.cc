#include "apps/fashion_mnist/models.h"

#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "apps/fashion_mnist/fashion_mnist.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::shared_ptr<Classifier> Make(const std::string& name, uint64_t seed) {
  torch::manual_seed(seed);
  absl::StatusOr<std::shared_ptr<Classifier>> model = MakeModel(name);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

std::vector<std::string> ParameterNames(const torch::nn::Module& model) {
  std::vector<std::string> names;
  for (const auto& item : model.named_parameters()) names.push_back(item.key());
  return names;
}

TEST(ModelsTest, MlpHasTheDocumentedParameters) {
  std::shared_ptr<Classifier> mlp = Make("mlp", 1);
  ASSERT_NE(mlp, nullptr);
  EXPECT_THAT(ParameterNames(*mlp),
              ElementsAre("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"));
  EXPECT_EQ(CountParameters(*mlp), (784 * 128 + 128) + (128 * 10 + 10));
  EXPECT_EQ(CountParameters(*mlp), 101770);
}

TEST(ModelsTest, CnnHasTheDocumentedParameters) {
  std::shared_ptr<Classifier> cnn = Make("cnn", 1);
  ASSERT_NE(cnn, nullptr);
  EXPECT_THAT(
      ParameterNames(*cnn),
      ElementsAre("conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                  "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"));
  const int64_t conv1 = 32 * 1 * 25 + 32;
  const int64_t conv2 = 64 * 32 * 25 + 64;
  const int64_t fc1 = 3136 * 1024 + 1024;
  const int64_t fc2 = 1024 * 10 + 10;
  EXPECT_EQ(CountParameters(*cnn), conv1 + conv2 + fc1 + fc2);
  EXPECT_EQ(CountParameters(*cnn), 3274634);
}

TEST(ModelsTest, OutputsTenLogitsPerImage) {
  for (const std::string& name : ModelNames()) {
    std::shared_ptr<Classifier> model = Make(name, 1);
    ASSERT_NE(model, nullptr);
    for (int64_t batch : {1, 5}) {
      const torch::Tensor out =
          model->forward(torch::randn({batch, 1, 28, 28}));
      EXPECT_EQ(out.sizes(), (std::vector<int64_t>{batch, 10})) << name;
    }
  }
}

TEST(ModelsTest, SameSeedGivesTheSameWeights) {
  for (const std::string& name : ModelNames()) {
    std::shared_ptr<Classifier> a = Make(name, 42);
    std::shared_ptr<Classifier> b = Make(name, 42);
    std::shared_ptr<Classifier> c = Make(name, 43);
    const std::vector<torch::Tensor> pa = a->parameters(), pb = b->parameters(),
                                     pc = c->parameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      EXPECT_TRUE(torch::equal(pa[i], pb[i])) << name << " parameter " << i;
    }
    EXPECT_FALSE(torch::equal(pa[0], pc[0])) << name;
  }
}

TEST(ModelsTest, UnknownNameIsAnError) {
  absl::StatusOr<std::shared_ptr<Classifier>> model = MakeModel("resnet");
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(),
              AllOf(HasSubstr("resnet"), HasSubstr("cnn, mlp")));
}

// A few full-batch SGD steps on real training images lower the loss. The
// CNN gets fewer images (a quarter of the 256) to stay within seconds on
// two shared cores: one full-batch step on 256 images takes ~2 s there.
struct TrainCase {
  std::string model;
  int64_t examples;
  int steps;
};

void PrintTo(const TrainCase& c, std::ostream* os) { *os << c.model; }

class ModelsTrainTest : public ::testing::TestWithParam<TrainCase> {};

TEST_P(ModelsTrainTest, SgdStepsReduceTheLoss) {
  const TrainCase& c = GetParam();
  if (!std::filesystem::exists(kFashionMnistDefaultDir)) {
    GTEST_SKIP() << "Fashion-MNIST is not installed in "
                 << kFashionMnistDefaultDir
                 << ": apt-get install dataset-fashion-mnist (or run "
                    "scripts/install-deps.sh)";
  }
  absl::StatusOr<Dataset> data =
      LoadFashionMnist(kFashionMnistDefaultDir, /*train=*/true, c.examples);
  ASSERT_TRUE(data.ok()) << data.status();
  std::shared_ptr<Classifier> model = Make(c.model, 3);
  ASSERT_NE(model, nullptr);
  torch::optim::SGD sgd(model->parameters(),
                        torch::optim::SGDOptions(0.05).momentum(0.9));

  const auto start = std::chrono::steady_clock::now();
  std::vector<float> losses;
  for (int step = 0; step < c.steps; ++step) {
    sgd.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(
        model->forward(data->images), data->labels);
    loss.backward();
    sgd.step();
    losses.push_back(loss.item<float>());
  }
  const std::chrono::duration<double> took =
      std::chrono::steady_clock::now() - start;
  std::cout << c.model << ": loss " << losses.front() << " -> " << losses.back()
            << " in " << c.steps << " steps on " << c.examples << " images, "
            << took.count() << " s\n";
  EXPECT_LT(losses.back(), 0.85 * losses.front());
}

INSTANTIATE_TEST_SUITE_P(AllModels, ModelsTrainTest,
                         ::testing::Values(TrainCase{"mlp", 256, 8},
                                           TrainCase{"cnn", 64, 6}),
                         [](const ::testing::TestParamInfo<TrainCase>& info) {
                           return info.param.model;
                         });

}  // namespace
}  // namespace gradwire
