// MQAR: every example follows the definition in docs/mqar.md, is a function of (seed, split, index)
// alone, and any number of data-parallel ranks read the examples one process reads.
#include "data/mqar.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "data_testing.h"

namespace linattn::data {
namespace {

using testing::error_of;

struct Example {
  std::vector<int32_t> inputs, targets;
  bool operator==(const Example&) const = default;
};

Example example(const MqarTask& task, int64_t T, MqarSplit split, uint64_t index) {
  Example e{std::vector<int32_t>(size_t(T)), std::vector<int32_t>(size_t(T))};
  mqar_example(e.inputs.data(), e.targets.data(), task, T, split, index);
  return e;
}

MqarTask task(int64_t vocab, int64_t pairs, uint64_t train = 100, uint64_t val = 30, double power_a = 0.01) {
  MqarTask t;
  t.vocab_size = vocab;
  t.num_kv_pairs = pairs;
  t.power_a = power_a;
  t.num_train_examples = train;
  t.num_val_examples = val;
  t.seed = 5;
  return t;
}

LoaderOptions options(int64_t batch, int64_t seq_len, int rank = 0, int world = 1) {
  LoaderOptions o;
  o.batch_size = batch;
  o.seq_len = seq_len;
  o.seed = 77;
  o.rank = rank;
  o.world_size = world;
  return o;
}

std::vector<Example> rows(const Batch& b) {
  std::vector<Example> out;
  const int64_t T = b.inputs.size(1);
  for (int64_t r = 0; r < b.rows; ++r) {
    const int32_t* in = b.inputs.data<int32_t>() + r * T;
    const int32_t* tg = b.targets.data<int32_t>() + r * T;
    out.push_back({{in, in + T}, {tg, tg + T}});
  }
  return out;
}

// Checks one example against the definition; returns the query slots it used.
std::vector<int64_t> expect_follows_definition(const Example& e, const MqarTask& t, int64_t T) {
  const int64_t K = t.num_kv_pairs, V = t.vocab_size, half = V / 2, S = mqar_query_slots(t, T);
  std::map<int32_t, int32_t> value_of;
  for (int64_t j = 0; j < K; ++j) {
    const int32_t k = e.inputs[size_t(2 * j)], v = e.inputs[size_t(2 * j + 1)];
    EXPECT_TRUE(k >= 1 && k < half) << "key " << k << " at " << 2 * j;
    EXPECT_TRUE(v >= half && v < V) << "value " << v << " at " << 2 * j + 1;
    EXPECT_TRUE(value_of.emplace(k, v).second) << "key " << k << " twice among the pairs";
    EXPECT_EQ(e.targets[size_t(2 * j)], kIgnoreTarget);
    EXPECT_EQ(e.targets[size_t(2 * j + 1)], kIgnoreTarget);
  }
  std::set<int32_t> values;
  for (auto [k, v] : value_of) values.insert(v);
  EXPECT_EQ(values.size(), size_t(K)) << "values must be distinct";

  std::vector<int64_t> slots;
  std::set<int32_t> queried;
  for (int64_t p = 2 * K; p < T; ++p) {
    const int32_t x = e.inputs[size_t(p)], y = e.targets[size_t(p)];
    EXPECT_TRUE(x >= 0 && x < V) << "token " << x << " at " << p;
    if (y == kIgnoreTarget) {
      EXPECT_EQ(value_of.count(x), 0u) << "filler " << x << " at " << p << " is a key";
      continue;
    }
    // A query: an even offset from the pairs, inside the slots, a key of the pairs, its value the target.
    EXPECT_EQ((p - 2 * K) % 2, 0) << "query at " << p;
    EXPECT_LT((p - 2 * K) / 2, S) << "query at " << p;
    EXPECT_EQ(value_of.count(x), 1u) << "query " << x << " at " << p << " is not a key of the pairs";
    EXPECT_EQ(y, value_of.count(x) ? value_of[x] : -1) << "the target of query " << x << " at " << p;
    EXPECT_TRUE(queried.insert(x).second) << "key " << x << " queried twice";
    slots.push_back((p - 2 * K) / 2);
  }
  EXPECT_EQ(queried.size(), size_t(K)) << "every key is queried once";
  return slots;
}

TEST(Mqar, ExamplesFollowTheDefinition) {
  // Zoology's sizes; a small vocabulary where filler would often hit keys; an odd seq_len; every slot a query.
  for (auto [t, T] : {std::pair{task(8192, 8), int64_t(64)}, {task(64, 6), 101}, {task(512, 16), 64}, {task(10, 4), 40}}) {
    SCOPED_TRACE("vocab " + std::to_string(t.vocab_size) + ", pairs " + std::to_string(t.num_kv_pairs) +
                 ", seq_len " + std::to_string(T));
    for (MqarSplit split : {MqarSplit::train, MqarSplit::val})
      for (uint64_t i = 0; i < 200; ++i) expect_follows_definition(example(t, T, split, i), t, T);
  }
}

// With one pair the query slot g is drawn with probability (g + 1)^(a - 1) / sum: each frequency over n
// examples must lie within 5 standard deviations sqrt(p (1 - p) / n) of it.
TEST(Mqar, QuerySlotsFollowThePowerLaw) {
  const int64_t S = 8, T = 2 + 2 * S;
  const uint64_t n = 40000;
  for (double a : {0.01, 0.5, 1.0}) {
    const MqarTask t = task(64, 1, 10, 10, a);
    std::vector<double> count(S, 0), p(S);
    double total = 0;
    for (int64_t g = 0; g < S; ++g) total += p[size_t(g)] = std::pow(double(g + 1), a - 1);
    for (uint64_t i = 0; i < n; ++i)
      for (int64_t g : expect_follows_definition(example(t, T, MqarSplit::train, i), t, T)) count[size_t(g)] += 1;
    for (int64_t g = 0; g < S; ++g) {
      const double expected = p[size_t(g)] / total, seen = count[size_t(g)] / double(n);
      const double tol = 5 * std::sqrt(expected * (1 - expected) / double(n));
      EXPECT_NEAR(seen, expected, tol) << "power_a " << a << ", slot " << g;
    }
  }
  // The law shapes the gaps: with power_a 0.01 about a third of the queries sit in the first slot.
  const MqarTask t = task(64, 1, 10, 10, 0.01);
  int first = 0;
  for (uint64_t i = 0; i < 3000; ++i) first += expect_follows_definition(example(t, T, MqarSplit::train, i), t, T)[0] == 0;
  EXPECT_GT(first, 3000 / 4);
}

TEST(Mqar, AnExampleIsAFunctionOfSeedSplitAndIndex) {
  const MqarTask t = task(8192, 8);
  MqarTask other_seed = t;
  other_seed.seed += 1;
  std::set<std::vector<int32_t>> seen;
  for (uint64_t i = 0; i < 1000; ++i) {
    const Example e = example(t, 64, MqarSplit::train, i);
    EXPECT_EQ(e, example(t, 64, MqarSplit::train, i));
    EXPECT_NE(e, example(t, 64, MqarSplit::val, i));
    EXPECT_NE(e, example(other_seed, 64, MqarSplit::train, i));
    EXPECT_TRUE(seen.insert(e.inputs).second) << "example " << i << " repeats an earlier one";
  }
  // The numbers of examples do not change an example.
  EXPECT_EQ(example(t, 64, MqarSplit::train, 7), example(task(8192, 8, 999, 1), 64, MqarSplit::train, 7));
}

TEST(MqarTrainLoader, EachEpochVisitsEveryExampleOnceInAnotherOrder) {
  const MqarTask t = task(64, 4, 50);
  MqarTrainLoader loader(t, options(10, 16));  // 5 batches an epoch
  std::vector<std::vector<uint64_t>> orders(3);
  for (int epoch = 0; epoch < 3; ++epoch)
    for (int b = 0; b < 5; ++b) {
      const std::vector<Example> got = rows(loader.next());
      for (int r = 0; r < 10; ++r) {
        const uint64_t index = loader.example_at(uint64_t(epoch), uint64_t(b * 10 + r));
        EXPECT_EQ(got[size_t(r)], example(t, 16, MqarSplit::train, index)) << "epoch " << epoch << " row " << b * 10 + r;
        orders[size_t(epoch)].push_back(index);
      }
    }
  for (auto& order : orders) {
    std::set<uint64_t> once(order.begin(), order.end());
    EXPECT_EQ(once.size(), 50u);
    EXPECT_EQ(*once.rbegin(), 49u);
  }
  EXPECT_NE(orders[0], orders[1]);
  EXPECT_EQ(loader.state().epoch, 3u);
  EXPECT_EQ(loader.state().position, 0u);
}

// 1 process reading batch_size * world rows, and 2 or 3 ranks reading batch_size rows each, see the
// same examples, batch by batch, across epoch ends (47 examples: batches straddle them).
TEST(MqarTrainLoader, RanksTogetherReadTheSingleProcessBatches) {
  const MqarTask t = task(64, 4, 47);
  for (int world : {2, 3}) {
    MqarTrainLoader single(t, options(4 * world, 16));
    std::vector<MqarTrainLoader> ranks;
    for (int r = 0; r < world; ++r) ranks.emplace_back(t, options(4, 16, r, world));
    for (int b = 0; b < 30; ++b) {
      const std::vector<Example> all = rows(single.next());
      for (int r = 0; r < world; ++r) {
        const std::vector<Example> part = rows(ranks[size_t(r)].next());
        for (int i = 0; i < 4; ++i)
          EXPECT_EQ(part[size_t(i)], all[size_t(r * 4 + i)]) << "world " << world << ", batch " << b << ", rank " << r;
        EXPECT_EQ(ranks[size_t(r)].state(), single.state());
      }
    }
  }
}

TEST(MqarTrainLoader, RestoredStateContinuesAndOtherTasksAreRefused) {
  const MqarTask t = task(64, 4, 47);
  MqarTrainLoader a(t, options(8, 16));
  for (int b = 0; b < 9; ++b) a.next();
  MqarTrainLoader b(t, options(8, 16));
  b.restore(a.state());
  for (int i = 0; i < 9; ++i) EXPECT_EQ(rows(a.next()), rows(b.next())) << "batch " << i << " after the restore";

  MqarTrainLoader fewer(task(64, 4, 46), options(8, 16)), shorter(t, options(8, 20));
  EXPECT_NE(error_of([&] { fewer.restore(a.state()); }).find("47 MQAR training examples, this task has 46"),
            std::string::npos);
  EXPECT_NE(error_of([&] { shorter.restore(a.state()); }).find("seq_len 16"), std::string::npos);
}

TEST(MqarValLoader, RanksSplitTheExamplesInOrderAndMaxTokensLimitsThem) {
  const MqarTask t = task(64, 4, 10, 23);
  for (int world : {1, 2, 3}) {
    std::vector<Example> seen;
    for (int r = 0; r < world; ++r) {
      MqarValLoader val(t, options(4, 16, r, world));
      EXPECT_TRUE(val.scores_recall());
      EXPECT_TRUE(std::isnan(val.bytes_per_token()));
      Batch b;
      for (int batch = 0; val.next(b); ++batch)
        for (const Example& e : rows(b)) seen.push_back(e);
    }
    ASSERT_EQ(seen.size(), 23u) << "world " << world;
    std::set<std::vector<int32_t>> distinct;
    for (const Example& e : seen) distinct.insert(e.inputs);
    EXPECT_EQ(distinct.size(), 23u);
    for (uint64_t i = 0; i < 23; ++i) EXPECT_EQ(distinct.count(example(t, 16, MqarSplit::val, i).inputs), 1u);
  }
  LoaderOptions o = options(4, 16);
  o.max_tokens = 16 * 9 + 5;
  EXPECT_EQ(MqarValLoader(t, o).num_examples(), 9u);
}

TEST(Mqar, ImpossibleTasksNameTheSettingToChange) {
  EXPECT_EQ(mqar_problem(task(512, 16), 64).key, "");
  EXPECT_EQ(mqar_problem(task(512, 16), 63).key, "seq_len");
  EXPECT_NE(mqar_problem(task(512, 16), 63).message.find("seq_len >= 4 num_kv_pairs = 64"), std::string::npos);
  EXPECT_EQ(mqar_problem(task(33, 16), 64).key, "vocab_size");
  EXPECT_EQ(mqar_problem(task(34, 16), 64).key, "");
  EXPECT_EQ(mqar_problem(task(512, 0), 64).key, "num_kv_pairs");
  EXPECT_EQ(mqar_problem(task(512, 4, 10, 10, 0.0), 64).key, "power_a");
  EXPECT_EQ(mqar_problem(task(512, 4, 0, 10), 64).key, "num_train_examples");
  EXPECT_EQ(mqar_problem(task(512, 4, 10, 0), 64).key, "num_val_examples");
  EXPECT_NE(error_of([] { MqarTrainLoader l(task(512, 16), options(4, 60)); }).find("MQAR: seq_len 60"),
            std::string::npos);
}

}  // namespace
}  // namespace linattn::data
