// InitElection: who sends a shard its initial values, and when the post
// passes to the next caller.
#include "server/shard/init_election.h"

#include "gtest/gtest.h"

namespace gradwire {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(30);
const absl::Time kStart = absl::FromUnixSeconds(5000);
// A preferred worker that the first-caller tests never hear from, with no
// grace for it: the first caller is elected.
constexpr uint32_t kAbsent = 99;

TEST(InitElectionTest, FirstCallerProvidesOthersWait) {
  InitElection election(kTimeout, absl::ZeroDuration());
  EXPECT_FALSE(election.provider().has_value());
  const InitElection::Verdict first = election.Offer(4, kAbsent, kStart);
  EXPECT_TRUE(first.send_values);
  EXPECT_EQ(first.provider, 4u);
  const InitElection::Verdict second =
      election.Offer(2, kAbsent, kStart + absl::Seconds(1));
  EXPECT_FALSE(second.send_values);
  EXPECT_EQ(second.provider, 4u);
  EXPECT_EQ(second.retry_after, absl::Milliseconds(200));
  EXPECT_EQ(election.provider(), 4u);
}

TEST(InitElectionTest, ProviderKeepsItsDeadlineWhenAskingAgain) {
  InitElection election(kTimeout, absl::ZeroDuration());
  ASSERT_TRUE(election.Offer(1, kAbsent, kStart).send_values);
  EXPECT_TRUE(
      election.Offer(1, kAbsent, kStart + absl::Seconds(29)).send_values);
  // The deadline ran from the first offer, not the repeated one.
  EXPECT_TRUE(election.Offer(3, kAbsent, kStart + kTimeout).send_values);
  EXPECT_EQ(election.provider(), 3u);
}

TEST(InitElectionTest, RetryComesNoLaterThanTheDeadline) {
  InitElection election(kTimeout, absl::ZeroDuration());
  ASSERT_TRUE(election.Offer(0, kAbsent, kStart).send_values);
  EXPECT_EQ(
      election.Offer(1, kAbsent, kStart + kTimeout - absl::Milliseconds(50))
          .retry_after,
      absl::Milliseconds(50));
  EXPECT_EQ(
      election.Offer(1, kAbsent, kStart + kTimeout - absl::Microseconds(10))
          .retry_after,
      absl::Milliseconds(5));
}

TEST(InitElectionTest, DeadlinePassesThePostOn) {
  InitElection election(kTimeout, absl::ZeroDuration());
  ASSERT_TRUE(election.Offer(0, kAbsent, kStart).send_values);
  const InitElection::Verdict waiting =
      election.Offer(1, kAbsent, kStart + kTimeout - absl::Nanoseconds(1));
  EXPECT_FALSE(waiting.send_values);
  const InitElection::Verdict elected =
      election.Offer(1, kAbsent, kStart + kTimeout);
  EXPECT_TRUE(elected.send_values);
  // The old provider now waits for the new one, whose deadline is fresh.
  const InitElection::Verdict old =
      election.Offer(0, kAbsent, kStart + kTimeout + absl::Seconds(29));
  EXPECT_FALSE(old.send_values);
  EXPECT_EQ(old.provider, 1u);
  EXPECT_TRUE(election.Offer(0, kAbsent, kStart + 2 * kTimeout).send_values);
}

TEST(InitElectionTest, CloseEndsTheElection) {
  InitElection election(kTimeout, absl::ZeroDuration());
  ASSERT_TRUE(election.Offer(0, kAbsent, kStart).send_values);
  election.Close();
  EXPECT_FALSE(election.provider().has_value());
  EXPECT_TRUE(
      election.Offer(5, kAbsent, kStart + absl::Seconds(1)).send_values);
}

// Within the grace from the first call the preferred worker is waited for,
// and elected when it asks; the others are told to ask again when the
// grace ends at the latest.
TEST(InitElectionTest, PreferredWorkerIsWaitedForWithinTheGrace) {
  constexpr absl::Duration kGrace = absl::Seconds(1);
  InitElection election(kTimeout, kGrace);
  const InitElection::Verdict early = election.Offer(0, 1, kStart);
  EXPECT_FALSE(early.send_values);
  EXPECT_EQ(early.provider, 1u);
  EXPECT_EQ(early.retry_after, absl::Milliseconds(200));
  EXPECT_EQ(election.Offer(0, 1, kStart + kGrace - absl::Milliseconds(20))
                .retry_after,
            absl::Milliseconds(20));
  EXPECT_FALSE(election.provider().has_value());
  EXPECT_TRUE(election.Offer(1, 1, kStart + kGrace - absl::Milliseconds(1))
                  .send_values);
  EXPECT_EQ(election.provider(), 1u);
  // The other callers now wait for it, past the grace too.
  const InitElection::Verdict after = election.Offer(0, 1, kStart + kGrace);
  EXPECT_FALSE(after.send_values);
  EXPECT_EQ(after.provider, 1u);
}

// A preferred worker that does not ask within the grace (late, or dead)
// does not hold the job up: the first caller after it is elected, and the
// preferred one then waits like any other.
TEST(InitElectionTest, GracePassesThePostToTheFirstCaller) {
  constexpr absl::Duration kGrace = absl::Milliseconds(500);
  InitElection election(kTimeout, kGrace);
  ASSERT_FALSE(election.Offer(2, 0, kStart).send_values);
  EXPECT_TRUE(election.Offer(2, 0, kStart + kGrace).send_values);
  const InitElection::Verdict late =
      election.Offer(0, 0, kStart + kGrace + absl::Milliseconds(1));
  EXPECT_FALSE(late.send_values);
  EXPECT_EQ(late.provider, 2u);
}

// A provider that missed its deadline (a caller claiming the preferred id
// that never delivers) is not elected again while another caller comes
// forward within a grace of the post falling vacant; the preferred worker
// is no longer waited for.
TEST(InitElectionTest, AProviderThatMissedItsDeadlineIsNotElectedAgain) {
  constexpr absl::Duration kGrace = absl::Seconds(1);
  InitElection election(kTimeout, kGrace);
  ASSERT_TRUE(election.Offer(2, 2, kStart).send_values);
  const absl::Time vacant = kStart + kTimeout;
  // It asks again right after its deadline: it waits for the others.
  const InitElection::Verdict again = election.Offer(2, 2, vacant);
  EXPECT_FALSE(again.send_values);
  EXPECT_EQ(again.retry_after, absl::Milliseconds(200));
  EXPECT_FALSE(election.provider().has_value());
  // Another worker is elected at once, without waiting for the preferred.
  EXPECT_TRUE(
      election.Offer(0, 2, vacant + absl::Milliseconds(10)).send_values);
  EXPECT_EQ(election.provider(), 0u);
  EXPECT_FALSE(
      election.Offer(2, 2, vacant + absl::Milliseconds(20)).send_values);
}

// When nobody else comes forward, the one that missed is elected again
// after the grace, so a job whose every worker was once too slow starts.
TEST(InitElectionTest, AloneTheProviderThatMissedIsElectedAfterTheGrace) {
  constexpr absl::Duration kGrace = absl::Seconds(1);
  InitElection election(kTimeout, kGrace);
  ASSERT_TRUE(election.Offer(2, 2, kStart).send_values);
  const absl::Time vacant = kStart + kTimeout;
  EXPECT_FALSE(
      election.Offer(2, 2, vacant + kGrace - absl::Nanoseconds(1)).send_values);
  EXPECT_TRUE(election.Offer(2, 2, vacant + kGrace).send_values);
}

// The grace is never longer than the provider's timeout.
TEST(InitElectionTest, GraceIsAtMostTheTimeout) {
  InitElection election(absl::Milliseconds(100), absl::Seconds(5));
  ASSERT_FALSE(election.Offer(3, 0, kStart).send_values);
  EXPECT_TRUE(
      election.Offer(3, 0, kStart + absl::Milliseconds(100)).send_values);
}

}  // namespace
}  // namespace gradwire
