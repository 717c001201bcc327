// Gradient buckets: every bucket's sum starts exactly once, in bucket order, and only once every
// gradient in it is final, checked without MPI by a communicator that records what each sum saw; also
// when activation recomputation writes the blocks' gradients inside a replay (autograd/checkpoint.h).
#include "train/grad_buckets.h"

#include <cstdlib>

#include "layers/mixer.h"
#include "layers/model.h"
#include "testing.h"
#include "train/config.h"

namespace linattn {
namespace {

// Each started sum's memory and a copy of its contents at the moment it started; the number of
// polls (one per tape node during a hooked backward) before it started.
class RecordingCommunicator : public Communicator {
 public:
  struct Start {
    const void* data;
    Tensor contents;
    int polls_before;
  };
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  const char* backend() const override { return "recording"; }
  void start_allreduce_sum(const Tensor& t) override { starts.push_back({t.raw(), t.clone(), polls}); }
  void poll() override { ++polls; }
  void wait_all() override { ++waits; }
  void allreduce_sum(double*, int) override {}
  void check_same(const std::string&, const char*) override {}
  void barrier() override {}
  void broadcast(void*, size_t, int) override {}
  [[noreturn]] void abort(int code) override { std::exit(code); }

  std::vector<Start> starts;
  int polls = 0, waits = 0;
};

// Every mixer of the registry (short convolutions too), then windowed attention, with or without the
// embedding tied to the LM head: the tied matrix receives gradient from the first and the last node
// of the tape.
ModelConfig hybrid(bool tied) {
  std::string layers;
  for (const std::string& name : mixer_names()) layers += name + ", ";
  return parse_config(std::string(R"(model:
  vocab_size: 11
  hidden_size: 8
  num_hidden_layers: )") + std::to_string(mixer_names().size() + 1) + R"(
  num_heads: 2
  intermediate_size: 12
  chunk_size: 4
  tie_word_embeddings: )" + (tied ? "true" : "false") + R"(
  layers: [)" + layers + R"({mixer: attention, window_size: 3}]
train: {max_steps: 1}
)",
                      "tiny.yaml")
      .model;
}

void random_batch(Rng& rng, Tensor& ids, Tensor& targets) {
  ids = Tensor::empty({2, 7}, DType::i32);
  targets = Tensor::empty({2, 7}, DType::i32);
  for (int64_t i = 0; i < 14; ++i) {
    ids.data<int32_t>()[i] = int32_t(rng.below(11));
    targets.data<int32_t>()[i] = int32_t(rng.below(11));
  }
}

struct Case {
  bool tied;
  int64_t bucket_bytes;  // 1: every parameter its own bucket
  int micro_batches;     // the hooks run on the last one's backward
  ops::Recompute recompute = ops::Recompute::none;
  friend void PrintTo(const Case& c, std::ostream* os) {
    *os << (c.tied ? "tied" : "untied") << ", " << c.bucket_bytes << "-byte buckets, " << c.micro_batches
        << " micro-batches, recompute " << ops::recompute_name(c.recompute);
  }
};

class GradientBucketsTest : public ::testing::TestWithParam<Case> {};

TEST_P(GradientBucketsTest, EachBucketStartsOnceInOrderWithItsFinalGradients) {
  const Case c = GetParam();
  Model model(hybrid(c.tied), DType::f64);
  model.set_recompute(c.recompute);
  Parameters& params = model.params();
  params.initialize(5);
  RecordingCommunicator comm;
  GradientBuckets buckets(params, c.bucket_bytes, comm);
  const auto& list = buckets.buckets();
  if (c.bucket_bytes == 1) {
    ASSERT_EQ(list.size(), params.size());
  } else {
    ASSERT_GT(list.size(), 2u);
  }

  // The buckets cover every parameter once, from the end of the buffer to its start.
  std::vector<int> covered(params.size(), 0);
  for (size_t b = 0; b < list.size(); ++b) {
    for (int p : list[b].params) {
      ++covered[size_t(p)];
      const FlatLayout::Entry& e = params.layout().entries()[size_t(p)];
      EXPECT_GE(e.offset, list[b].begin);
      EXPECT_LE(e.offset + e.shape.numel(), list[b].end);
    }
    if (b > 0) {
      EXPECT_LE(list[b].end, list[b - 1].begin);
    }
  }
  for (size_t p = 0; p < params.size(); ++p) EXPECT_EQ(covered[p], 1) << params.name(int(p));

  Rng rng(9);
  Tensor seed = Tensor::empty({1}, DType::f64);
  seed.fill_(0.5);
  for (int step = 0; step < 2; ++step) {  // the second step checks that finish() made it ready again
    SCOPED_TRACE("step " + std::to_string(step));
    params.zero_grad();
    comm.starts.clear();
    comm.polls = 0;
    for (int micro = 0; micro < c.micro_batches; ++micro) {
      Tensor ids, targets;
      random_batch(rng, ids, targets);
      Variable loss = model.loss(ids, targets);
      if (micro == c.micro_batches - 1) backward({loss}, {seed}, &buckets.hooks());
      else backward({loss}, {seed});
    }
    const int nodes = comm.polls;
    // Every parameter is final when backward returns: each bucket has started by then.
    ASSERT_EQ(comm.starts.size(), list.size());
    buckets.finish();
    ASSERT_EQ(comm.starts.size(), list.size()) << "finish() started a bucket twice";
    EXPECT_EQ(comm.waits, step + 1);

    const Tensor& grads = params.grads().all();
    for (size_t b = 0; b < list.size(); ++b) {
      SCOPED_TRACE("bucket " + std::to_string(b) + ", first parameter " + params.name(list[b].params.front()));
      Tensor now = grads.narrow(list[b].begin, list[b].end);
      EXPECT_EQ(comm.starts[b].data, now.raw()) << "buckets started out of order";
      // Nothing wrote into the bucket after its sum started: its contents then are the final gradients.
      testing::Error err = testing::compare(comm.starts[b].contents, now);
      EXPECT_EQ(err.max_abs, 0.0) << err.str();
      EXPECT_GT(testing::max_abs(now), 0.0) << "a bucket without gradient proves nothing";
    }
    // The sums overlap backward: the first bucket (the LM head or the final norm) starts within the
    // first few nodes, long before the last one (with recomputation a node is a whole block: within
    // the first half).
    EXPECT_LT(comm.starts.front().polls_before, c.recompute == ops::Recompute::none ? nodes / 4 : nodes / 2)
        << nodes << " nodes";
    EXPECT_GE(comm.starts.back().polls_before, nodes - 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, GradientBucketsTest,
                         ::testing::Values(Case{false, 1, 1}, Case{true, 1, 1}, Case{true, 1, 2}, Case{false, 1024, 2},
                                           Case{true, 1024, 1}, Case{false, 1, 1, ops::Recompute::selective},
                                           Case{true, 1, 2, ops::Recompute::full},
                                           Case{false, 1024, 2, ops::Recompute::full}),
                         [](const auto& info) {
                           const Case& c = info.param;
                           const std::string recompute = c.recompute == ops::Recompute::selective ? "Selective"
                                                         : c.recompute == ops::Recompute::full    ? "Full"
                                                                                                  : "";
                           return std::string(c.tied ? "Tied" : "Untied") +
                                  (c.bucket_bytes == 1 ? "OneParameterPerBucket" : "KiloByteBuckets") +
                                  std::to_string(c.micro_batches) + "MicroBatches" +
                                  (recompute.empty() ? "" : "Recompute" + recompute);
                         });

TEST(GradientBuckets, FinishStartsEveryBucketInOrderWhenBackwardDidNotRun) {
  // A rank whose forward threw never runs the hooked backward; it must still start every sum, in
  // the same order as the other ranks.
  Model model(hybrid(false), DType::f32);
  RecordingCommunicator comm;
  GradientBuckets buckets(model.params(), 256, comm);
  buckets.finish();
  const auto& list = buckets.buckets();
  ASSERT_GT(list.size(), 2u);
  ASSERT_EQ(comm.starts.size(), list.size());
  for (size_t b = 0; b < list.size(); ++b)
    EXPECT_EQ(comm.starts[b].data, model.params().grads().all().narrow(list[b].begin, list[b].end).raw());
}

}  // namespace
}  // namespace linattn
