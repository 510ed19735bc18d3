// GrammarCache: a constraint is compiled once and shared, (kind, text) is the key, the least
// recently used grammar goes first when the bound is reached, failures are not cached, and
// concurrent lookups of one constraint end with one cached grammar.
#include "sampling/grammar_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "grammar_test_util.h"

namespace radixserve::sampling {
namespace {

// A cache over the real compiler (stories260K) that counts compilations.
struct CountingCache {
  explicit CountingCache(size_t capacity)
      : compiler(*test::Stories().grammar, {}),
        cache(
            [this](const GrammarSpec& spec) {
              ++compiles;
              return compiler.Compile(spec);
            },
            capacity) {}
  GrammarCompiler compiler;
  std::atomic<int> compiles{0};
  GrammarCache cache;
};

std::shared_ptr<const CompiledGrammar> MustGet(GrammarCache& cache, GrammarKind kind,
                                               const std::string& text) {
  auto got = cache.Get({kind, text});
  EXPECT_TRUE(got.ok()) << got.status().message();
  return got.ok() ? got.value() : nullptr;
}

TEST(GrammarCacheTest, SecondLookupIsAHitSharingTheGrammar) {
  CountingCache c(8);
  auto first = MustGet(c.cache, GrammarKind::kRegex, "[0-9]{3}");
  auto second = MustGet(c.cache, GrammarKind::kRegex, "[0-9]{3}");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first.get(), second.get());
  EXPECT_EQ(c.compiles.load(), 1);
  const GrammarCache::Stats stats = c.cache.stats();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.size, 1u);
}

TEST(GrammarCacheTest, FindNeverCompiles) {
  CountingCache c(8);
  EXPECT_EQ(c.cache.Find({GrammarKind::kRegex, "[0-9]{3}"}), nullptr);
  EXPECT_EQ(c.compiles.load(), 0);
  auto got = MustGet(c.cache, GrammarKind::kRegex, "[0-9]{3}");
  EXPECT_EQ(c.cache.Find({GrammarKind::kRegex, "[0-9]{3}"}).get(), got.get());
  EXPECT_EQ(c.cache.Find({GrammarKind::kRegex, "[0-9]{4}"}), nullptr);
  EXPECT_EQ(c.compiles.load(), 1);
}

TEST(GrammarCacheTest, KindIsPartOfTheKey) {
  CountingCache c(8);
  // The same text is a regex in one request and a Lark grammar in another.
  auto regex = MustGet(c.cache, GrammarKind::kRegex, "start: /[a-z]+/");
  auto lark = MustGet(c.cache, GrammarKind::kLark, "start: /[a-z]+/");
  ASSERT_NE(regex, nullptr);
  ASSERT_NE(lark, nullptr);
  EXPECT_NE(regex.get(), lark.get());
  EXPECT_EQ(c.compiles.load(), 2);
}

TEST(GrammarCacheTest, EvictsTheLeastRecentlyUsed) {
  CountingCache c(2);
  auto a = MustGet(c.cache, GrammarKind::kRegex, "a+");
  MustGet(c.cache, GrammarKind::kRegex, "b+");
  MustGet(c.cache, GrammarKind::kRegex, "a+");  // a is now the most recent
  MustGet(c.cache, GrammarKind::kRegex, "c+");  // evicts b
  EXPECT_EQ(c.compiles.load(), 3);
  EXPECT_EQ(c.cache.stats().size, 2u);
  EXPECT_EQ(MustGet(c.cache, GrammarKind::kRegex, "a+").get(), a.get());
  EXPECT_EQ(c.compiles.load(), 3);
  MustGet(c.cache, GrammarKind::kRegex, "b+");
  EXPECT_EQ(c.compiles.load(), 4);
  // An evicted grammar stays usable by whoever still holds it.
  GrammarMatcher matcher = a->NewMatcher();
  std::vector<uint32_t> mask(matcher.bitmask_words());
  EXPECT_TRUE(matcher.FillNextTokenBitmask(mask).ok());
}

TEST(GrammarCacheTest, FailuresAreReportedAndNotCached) {
  CountingCache c(8);
  for (int i = 0; i < 2; ++i) {
    auto got = c.cache.Get({GrammarKind::kRegex, "[0-9"});
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(got.status().message().find("regex"), std::string::npos);
  }
  EXPECT_EQ(c.compiles.load(), 2);
  EXPECT_EQ(c.cache.stats().size, 0u);
}

TEST(GrammarCacheTest, ConcurrentLookupsShareOneGrammar) {
  CountingCache c(8);
  const std::string schema =
      R"({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})";
  std::vector<std::shared_ptr<const CompiledGrammar>> got(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] { got[i] = MustGet(c.cache, GrammarKind::kJsonSchema, schema); });
  }
  for (auto& t : threads) t.join();
  for (const auto& g : got) ASSERT_NE(g, nullptr);
  EXPECT_EQ(c.cache.stats().size, 1u);
  EXPECT_GE(c.compiles.load(), 1);
  // Later lookups all return the cached one.
  auto later = MustGet(c.cache, GrammarKind::kJsonSchema, schema);
  int same = 0;
  for (const auto& g : got) same += g.get() == later.get();
  EXPECT_GE(same, 1);
}

}  // namespace
}  // namespace radixserve::sampling
