#include "client/message_parts.h"

#include "absl/strings/str_format.h"
#include "google/protobuf/io/coded_stream.h"

namespace gradwire {
namespace {

// Each message's chunk entry as it is framed in the request: a one-byte
// tag, its length's varint, its bytes.
template <typename Chunks>
std::vector<uint64_t> FramedSizes(const Chunks& chunks) {
  std::vector<uint64_t> sizes;
  sizes.reserve(chunks.size());
  for (const auto& chunk : chunks) {
    const uint64_t bytes = chunk.ByteSizeLong();
    sizes.push_back(
        1 + google::protobuf::io::CodedOutputStream::VarintSize64(bytes) +
        bytes);
  }
  return sizes;
}

// What a request is without its chunk entries (whose framed sizes are
// `sizes`): the part every piece repeats. No copy of the request is made.
template <typename Request>
uint64_t HeaderBytes(const Request& request,
                     const std::vector<uint64_t>& sizes) {
  uint64_t chunks = 0;
  for (const uint64_t size : sizes) chunks += size;
  return request.ByteSizeLong() - chunks;
}

// Each part's field framing and the part fields (values_part and
// values_parts, a tag and a varint each) on top of the request's header.
constexpr uint64_t kPartFieldsBytes = 2 * (1 + 5);

// Groups the items of `sizes` in order so that `header` + each group's sum
// stays within `limit`; returns each group's first index, or -1 in *too_big
// naming the first item that does not fit alone.
std::vector<int> GroupStarts(const std::vector<uint64_t>& sizes,
                             uint64_t header, uint64_t limit, int* too_big) {
  std::vector<int> starts;
  uint64_t used = limit;  // Forces a first group.
  *too_big = -1;
  for (int i = 0; i < static_cast<int>(sizes.size()); ++i) {
    if (header + sizes[i] > limit) {
      *too_big = i;
      return {};
    }
    if (used + sizes[i] > limit) {
      starts.push_back(i);
      used = header;
    }
    used += sizes[i];
  }
  return starts;
}

uint64_t Limit(uint64_t max_bytes) {
  return max_bytes > kMessageMarginBytes ? max_bytes - kMessageMarginBytes : 0;
}

}  // namespace

absl::StatusOr<std::vector<int>> InitPartStarts(const v1::InitRequest& request,
                                                uint64_t max_bytes) {
  const uint64_t limit = Limit(max_bytes);
  if (request.ByteSizeLong() <= limit) return std::vector<int>{0};
  if (request.values_omitted()) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "Init without values of %d chunks is %d bytes, over the message "
        "limit of %d bytes: use larger chunks",
        request.chunks_size(), request.ByteSizeLong(), max_bytes));
  }
  const std::vector<uint64_t> sizes = FramedSizes(request.chunks());
  int too_big = -1;
  std::vector<int> starts = GroupStarts(
      sizes, HeaderBytes(request, sizes) + kPartFieldsBytes, limit, &too_big);
  if (too_big >= 0) {
    const v1::ChunkDeclaration& chunk = request.chunks(too_big);
    return absl::ResourceExhaustedError(absl::StrFormat(
        "Init: chunk %d (%s at %d) alone is %d bytes, over the message limit "
        "of %d bytes: use smaller chunks (partition bytes) or raise "
        "--max-message-bytes on the shards and the workers",
        chunk.key(), chunk.tensor_name(), chunk.offset(), sizes[too_big],
        max_bytes));
  }
  return starts;
}

v1::InitRequest InitPart(const v1::InitRequest& request,
                         const std::vector<int>& starts, size_t part) {
  v1::InitRequest message;
  message.set_worker_id(request.worker_id());
  message.set_shard_id(request.shard_id());
  *message.mutable_config() = request.config();
  message.set_values_part(static_cast<uint32_t>(part));
  message.set_values_parts(static_cast<uint32_t>(starts.size()));
  const int end =
      part + 1 < starts.size() ? starts[part + 1] : request.chunks_size();
  for (int i = starts[part]; i < end; ++i) {
    *message.add_chunks() = request.chunks(i);
  }
  return message;
}

absl::StatusOr<std::vector<v1::InitRequest>> SplitInit(
    const v1::InitRequest& request, uint64_t max_bytes) {
  absl::StatusOr<std::vector<int>> starts = InitPartStarts(request, max_bytes);
  if (!starts.ok()) return starts.status();
  if (starts->size() == 1) return std::vector{request};
  std::vector<v1::InitRequest> parts;
  parts.reserve(starts->size());
  for (size_t p = 0; p < starts->size(); ++p) {
    parts.push_back(InitPart(request, *starts, p));
  }
  return parts;
}

v1::InitRequest WithoutValues(const v1::InitRequest& request) {
  v1::InitRequest valueless = request;
  valueless.set_values_omitted(true);
  valueless.clear_values_part();
  valueless.clear_values_parts();
  for (v1::ChunkDeclaration& chunk : *valueless.mutable_chunks()) {
    const uint64_t numel = chunk.initial().numel();
    chunk.mutable_initial()->Clear();
    chunk.mutable_initial()->set_numel(numel);
  }
  return valueless;
}

absl::StatusOr<std::vector<v1::PushRequest>> SplitPush(
    const v1::PushRequest& request, uint64_t max_bytes) {
  const uint64_t limit = Limit(max_bytes);
  if (request.ByteSizeLong() <= limit) return std::vector{request};
  const std::vector<uint64_t> sizes = FramedSizes(request.chunks());
  int too_big = -1;
  const std::vector<int> starts =
      GroupStarts(sizes, HeaderBytes(request, sizes), limit, &too_big);
  if (too_big >= 0) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "Push: chunk %d alone is %d bytes, over the message limit of %d "
        "bytes: use smaller chunks (partition bytes) or raise "
        "--max-message-bytes on the shards and the workers",
        request.chunks(too_big).key(), sizes[too_big], max_bytes));
  }
  std::vector<v1::PushRequest> parts(starts.size());
  for (size_t p = 0; p < parts.size(); ++p) {
    parts[p].set_worker_id(request.worker_id());
    parts[p].set_step(request.step());
    const int end =
        p + 1 < starts.size() ? starts[p + 1] : request.chunks_size();
    for (int i = starts[p]; i < end; ++i) {
      *parts[p].add_chunks() = request.chunks(i);
    }
  }
  return parts;
}

}  // namespace gradwire
