#include "server/process/request_fields.h"

#include <string>

#include "gradwire/v1/parameter_server.pb.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

RequestFieldCount Count(const std::string& bytes,
                        const google::protobuf::Descriptor& type,
                        RequestFieldLimits limits = {}) {
  grpc::Slice slice(bytes);
  grpc::ByteBuffer buffer(&slice, 1);
  return CountRequestFields(buffer, type, limits);
}

// `body` as length-delimited field `number` (body under 128 bytes).
std::string Nested(int number, const std::string& body) {
  return std::string(1, static_cast<char>(number << 3 | 2)) +
         std::string(1, static_cast<char>(body.size())) + body;
}

v1::PullRequest PullOfKeys(int keys) {
  v1::PullRequest pull;
  pull.set_worker_id(3);
  pull.set_allow_delta(true);
  for (int key = 0; key < keys; ++key) {
    v1::ChunkPull* chunk = pull.add_chunks();
    chunk->set_key(key);
    chunk->set_have_version(7);
    chunk->set_have_epoch(0x1234567890abcdef);
  }
  return pull;
}

TEST(RequestFieldsTest, AKnownMessageHasNoUnknownFields) {
  const RequestFieldCount count =
      Count(PullOfKeys(5).SerializeAsString(), *v1::PullRequest::descriptor(),
            {v1::PullRequest::kChunksFieldNumber, 100});
  EXPECT_TRUE(count.well_formed);
  EXPECT_EQ(count.entries, 5u);
  EXPECT_EQ(count.unknown_fields, 0u);
  EXPECT_EQ(count.first_unknown_in, nullptr);
}

TEST(RequestFieldsTest, UnknownFieldsAreCountedAtEveryDepth) {
  // Field 15 (empty) at the top, field 9 (varint) in a chunk entry, and a
  // known field (key, a varint) sent as fixed32: protobuf keeps all three.
  const std::string bytes = std::string("\x7a\x00", 2) +
                            Nested(2, std::string("\x08\x01\x48\x05", 4)) +
                            Nested(2, std::string("\x0d\x01\x02\x03\x04", 5));
  const RequestFieldCount count = Count(bytes, *v1::PullRequest::descriptor());
  EXPECT_TRUE(count.well_formed);
  EXPECT_EQ(count.unknown_fields, 3u);
  EXPECT_EQ(count.first_unknown_number, 15);
  EXPECT_EQ(count.first_unknown_in, v1::PullRequest::descriptor());
}

TEST(RequestFieldsTest, EachFieldOfAnUnknownGroupCounts) {
  // Group 20 holding two varints and group 21 (empty), then its end.
  const std::string bytes("\xa3\x01\x08\x01\x10\x02\xab\x01\xac\x01\xa4\x01",
                          12);
  const RequestFieldCount count =
      Count(bytes, *v1::GetInfoRequest::descriptor());
  EXPECT_TRUE(count.well_formed);
  EXPECT_EQ(count.unknown_fields, 4u);
  EXPECT_EQ(count.first_unknown_number, 20);
}

TEST(RequestFieldsTest, CountingStopsOnePastALimit) {
  std::string fields;
  for (int i = 0; i < 10000; ++i) fields.append("\x7a\x00", 2);
  RequestFieldLimits limits;
  limits.max_unknown_fields = 9999;
  EXPECT_EQ(
      Count(fields, *v1::GetInfoRequest::descriptor(), limits).unknown_fields,
      10000u);
  limits.max_unknown_fields = 10;
  EXPECT_EQ(
      Count(fields, *v1::GetInfoRequest::descriptor(), limits).unknown_fields,
      11u);

  const std::string pull = PullOfKeys(50).SerializeAsString();
  EXPECT_EQ(Count(pull, *v1::PullRequest::descriptor(),
                  {v1::PullRequest::kChunksFieldNumber, 50})
                .entries,
            50u);
  EXPECT_EQ(Count(pull, *v1::PullRequest::descriptor(),
                  {v1::PullRequest::kChunksFieldNumber, 20})
                .entries,
            21u);
}

TEST(RequestFieldsTest, MalformedBytesAreSaidToBe) {
  const std::string cases[] = {
      std::string("\x00\x01", 2),                 // tag 0
      std::string("\x0c", 1),                     // end group, no group
      std::string("\x7a\x05\x00", 3),             // length past the end
      Nested(2, std::string("\x08", 1)),          // cut-short varint
      std::string("\xa3\x01\x08\x01", 4),         // group with no end
      std::string("\xa3\x01\xac\x01", 4),         // group ends as another
      std::string("\x7e", 1),                     // wire type 6
      "\x08" + std::string(10, '\xff') + "\x01",  // 11-byte varint
  };
  for (const std::string& bytes : cases) {
    EXPECT_FALSE(Count(bytes, *v1::PullRequest::descriptor()).well_formed)
        << testing::PrintToString(bytes);
  }
}

// A tag padded past 5 bytes (0x80 continuation bytes): ReadTag would take
// it as field 15, protobuf's parser refuses it, so the count must too.
TEST(RequestFieldsTest, ATagLongerThanFiveBytesIsMalformed) {
  const std::string six_bytes("\xfa\x80\x80\x80\x80\x00\x00", 7);
  EXPECT_FALSE(Count(six_bytes, *v1::GetInfoRequest::descriptor()).well_formed);
  v1::GetInfoRequest parsed;
  EXPECT_FALSE(parsed.ParseFromString(six_bytes));
  // The 5-byte form is one both read.
  const std::string five_bytes("\xfa\x80\x80\x80\x00\x00", 6);
  const RequestFieldCount count =
      Count(five_bytes, *v1::GetInfoRequest::descriptor());
  EXPECT_TRUE(count.well_formed);
  EXPECT_EQ(count.unknown_fields, 1u);
  EXPECT_TRUE(parsed.ParseFromString(five_bytes));
}

// A length longer than 5 bytes, or one that ReadVarint32 would truncate to
// 32 bits (2^49 here, read as 0), is refused by the parser, so by the count.
TEST(RequestFieldsTest, ALengthTheParserRefusesIsMalformed) {
  const std::string cases[] = {
      // Unknown field 15, length 0 written in 6 bytes.
      std::string("\x7a\x80\x80\x80\x80\x80\x00", 7),
      // In an unknown group: field 1, length 2^49; then the group's end.
      std::string("\x13\x0a\x80\x80\x80\x80\x80\x80\x80\x01\x14", 11),
      // A known message field (PullRequest.chunks) with a 6-byte length.
      std::string("\x12\x80\x80\x80\x80\x80\x00", 7),
  };
  for (const std::string& bytes : cases) {
    EXPECT_FALSE(Count(bytes, *v1::PullRequest::descriptor()).well_formed)
        << testing::PrintToString(bytes);
    v1::PullRequest parsed;
    EXPECT_FALSE(parsed.ParseFromString(bytes))
        << testing::PrintToString(bytes);
  }
}

TEST(RequestFieldsTest, NestingBeyondProtobufsLimitIsMalformed) {
  // Unknown groups 101 deep, which protobuf refuses too.
  std::string bytes;
  for (int i = 0; i < 101; ++i) bytes += "\xa3\x01";
  for (int i = 0; i < 101; ++i) bytes += "\xa4\x01";
  EXPECT_FALSE(Count(bytes, *v1::GetInfoRequest::descriptor()).well_formed);
  v1::GetInfoRequest parsed;
  EXPECT_FALSE(parsed.ParseFromString(bytes));
}

}  // namespace
}  // namespace gradwire
