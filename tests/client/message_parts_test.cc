// SplitInit, WithoutValues and SplitPush (client/message_parts.h): every
// part fits the limit, the parts together are the request, in order.
#include "client/message_parts.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gradwire {
namespace {

// An Init of `chunks` declarations of `numel` dense floats each.
v1::InitRequest BigInit(int chunks, int numel) {
  v1::InitRequest request;
  request.set_worker_id(1);
  request.set_shard_id(2);
  request.mutable_config()->set_num_workers(3);
  for (int c = 0; c < chunks; ++c) {
    v1::ChunkDeclaration* chunk = request.add_chunks();
    chunk->set_key(10 + c);
    chunk->set_tensor_name("layer" + std::to_string(c));
    chunk->set_fingerprint(100 + c);
    chunk->mutable_initial()->set_numel(numel);
    chunk->mutable_initial()->mutable_dense()->set_values(
        std::string(4 * numel, static_cast<char>('a' + c)));
  }
  return request;
}

TEST(MessagePartsTest, AnInitThatFitsIsSentWhole) {
  const v1::InitRequest request = BigInit(3, 100);
  auto parts = SplitInit(request, 1 << 20);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_EQ((*parts)[0].SerializeAsString(), request.SerializeAsString());
  EXPECT_EQ((*parts)[0].values_parts(), 0u);
}

TEST(MessagePartsTest, ALargeInitTravelsInPartsThatEachFit) {
  const v1::InitRequest request = BigInit(10, 1000);  // ~40 KB
  const uint64_t limit = 9000;
  auto parts = SplitInit(request, limit);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_GT(parts->size(), 1u);
  std::vector<uint64_t> keys;
  for (size_t p = 0; p < parts->size(); ++p) {
    const v1::InitRequest& part = (*parts)[p];
    EXPECT_LE(part.ByteSizeLong() + kMessageMarginBytes, limit);
    EXPECT_EQ(part.values_part(), p);
    EXPECT_EQ(part.values_parts(), parts->size());
    EXPECT_EQ(part.worker_id(), 1u);
    EXPECT_EQ(part.shard_id(), 2u);
    EXPECT_EQ(part.config().num_workers(), 3u);
    EXPECT_FALSE(part.values_omitted());
    for (const v1::ChunkDeclaration& chunk : part.chunks()) {
      EXPECT_EQ(chunk.initial().dense().values().size(), 4000u);
      keys.push_back(chunk.key());
    }
  }
  std::vector<uint64_t> expected;
  for (const v1::ChunkDeclaration& chunk : request.chunks()) {
    expected.push_back(chunk.key());
  }
  EXPECT_EQ(keys, expected);
}

TEST(MessagePartsTest, AChunkLargerThanTheLimitIsNamed) {
  auto parts = SplitInit(BigInit(2, 1000), 2000);
  ASSERT_FALSE(parts.ok());
  EXPECT_EQ(parts.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(parts.status().message().find("chunk 10 (layer0"),
            std::string::npos)
      << parts.status();
}

TEST(MessagePartsTest, WithoutValuesKeepsNumelAndFingerprints) {
  v1::InitRequest part = BigInit(2, 50);
  part.set_values_part(1);
  part.set_values_parts(2);
  const v1::InitRequest valueless = WithoutValues(part);
  EXPECT_TRUE(valueless.values_omitted());
  EXPECT_EQ(valueless.values_parts(), 0u);
  ASSERT_EQ(valueless.chunks_size(), 2);
  EXPECT_EQ(valueless.chunks(1).initial().numel(), 50u);
  EXPECT_FALSE(valueless.chunks(1).initial().has_dense());
  EXPECT_EQ(valueless.chunks(1).fingerprint(), 101u);
  EXPECT_EQ(valueless.chunks(1).key(), 11u);
}

TEST(MessagePartsTest, ALargePushBecomesPushesOfTheSameStep) {
  v1::PushRequest request;
  request.set_worker_id(4);
  request.set_step(77);
  for (int c = 0; c < 6; ++c) {
    v1::ChunkGradient* chunk = request.add_chunks();
    chunk->set_key(c);
    chunk->mutable_gradient()->set_numel(500);
    chunk->mutable_gradient()->mutable_dense()->set_values(
        std::string(2000, 'x'));
  }
  auto parts = SplitPush(request, 5000);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 3u);
  int next_key = 0;
  for (const v1::PushRequest& part : *parts) {
    EXPECT_LE(part.ByteSizeLong() + kMessageMarginBytes, 5000u);
    EXPECT_EQ(part.worker_id(), 4u);
    EXPECT_EQ(part.step(), 77u);
    for (const v1::ChunkGradient& chunk : part.chunks()) {
      EXPECT_EQ(chunk.key(), static_cast<uint64_t>(next_key++));
    }
  }
  EXPECT_EQ(next_key, 6);
  auto whole = SplitPush(request, 1 << 20);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->size(), 1u);
}

}  // namespace
}  // namespace gradwire
