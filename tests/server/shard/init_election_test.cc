// InitElection: who sends a shard its initial values, and when the post
// passes to the next caller.
#include "server/shard/init_election.h"

#include "gtest/gtest.h"

namespace gradwire {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(30);
const absl::Time kStart = absl::FromUnixSeconds(5000);

TEST(InitElectionTest, FirstCallerProvidesOthersWait) {
  InitElection election(kTimeout);
  EXPECT_FALSE(election.provider().has_value());
  const InitElection::Verdict first = election.Offer(4, kStart);
  EXPECT_TRUE(first.send_values);
  EXPECT_EQ(first.provider, 4u);
  const InitElection::Verdict second =
      election.Offer(2, kStart + absl::Seconds(1));
  EXPECT_FALSE(second.send_values);
  EXPECT_EQ(second.provider, 4u);
  EXPECT_EQ(second.retry_after, absl::Milliseconds(200));
  EXPECT_EQ(election.provider(), 4u);
}

TEST(InitElectionTest, ProviderKeepsItsDeadlineWhenAskingAgain) {
  InitElection election(kTimeout);
  ASSERT_TRUE(election.Offer(1, kStart).send_values);
  EXPECT_TRUE(election.Offer(1, kStart + absl::Seconds(29)).send_values);
  // The deadline ran from the first offer, not the repeated one.
  EXPECT_TRUE(election.Offer(3, kStart + kTimeout).send_values);
  EXPECT_EQ(election.provider(), 3u);
}

TEST(InitElectionTest, RetryComesNoLaterThanTheDeadline) {
  InitElection election(kTimeout);
  ASSERT_TRUE(election.Offer(0, kStart).send_values);
  EXPECT_EQ(
      election.Offer(1, kStart + kTimeout - absl::Milliseconds(50)).retry_after,
      absl::Milliseconds(50));
  EXPECT_EQ(
      election.Offer(1, kStart + kTimeout - absl::Microseconds(10)).retry_after,
      absl::Milliseconds(5));
}

TEST(InitElectionTest, DeadlinePassesThePostOn) {
  InitElection election(kTimeout);
  ASSERT_TRUE(election.Offer(0, kStart).send_values);
  const InitElection::Verdict waiting =
      election.Offer(1, kStart + kTimeout - absl::Nanoseconds(1));
  EXPECT_FALSE(waiting.send_values);
  const InitElection::Verdict elected = election.Offer(1, kStart + kTimeout);
  EXPECT_TRUE(elected.send_values);
  // The old provider now waits for the new one, whose deadline is fresh.
  const InitElection::Verdict old =
      election.Offer(0, kStart + kTimeout + absl::Seconds(29));
  EXPECT_FALSE(old.send_values);
  EXPECT_EQ(old.provider, 1u);
  EXPECT_TRUE(election.Offer(0, kStart + 2 * kTimeout).send_values);
}

TEST(InitElectionTest, CloseEndsTheElection) {
  InitElection election(kTimeout);
  ASSERT_TRUE(election.Offer(0, kStart).send_values);
  election.Close();
  EXPECT_FALSE(election.provider().has_value());
  EXPECT_TRUE(election.Offer(5, kStart + absl::Seconds(1)).send_values);
}

}  // namespace
}  // namespace gradwire
