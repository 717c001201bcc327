// Training and validation loaders: reproducible, restorable, split between ranks, reading the right
// windows of the stream.
#include <algorithm>
#include <cstring>
#include <set>

#include "data/dataset.h"
#include "data/prepare.h"
#include "data_testing.h"

namespace linattn::data {
namespace {

using testing::error_of;
using testing::TempDir;

// A split whose token i is i (n < 65536), so a window's first input names where it starts.
std::shared_ptr<const Dataset> counting_dataset(const TempDir& dir, uint32_t n, const std::string& name = "train.bin",
                                                uint64_t text_bytes = 0) {
  ShardWriter w(dir / name, "test", 65536, 0);
  std::vector<uint32_t> ids(n);
  for (uint32_t i = 0; i < n; ++i) ids[i] = i;
  w.add_tokens(ids.data(), ids.size(), text_bytes);
  w.finish();
  return std::make_shared<const Dataset>(std::vector<std::string>{dir / name});
}

std::vector<int32_t> rows_of(const Tensor& t) { return {t.data<int32_t>(), t.data<int32_t>() + t.numel()}; }

struct Drawn {
  std::vector<int32_t> inputs, targets;
  bool operator==(const Drawn&) const = default;
};

std::vector<Drawn> draw(TrainLoader& loader, int batches) {
  std::vector<Drawn> out;
  for (int b = 0; b < batches; ++b) {
    const Batch batch = loader.next();
    out.push_back({rows_of(batch.inputs), rows_of(batch.targets)});
  }
  return out;
}

LoaderOptions options(int64_t batch, int64_t seq_len, uint64_t seed, int rank = 0, int world = 1) {
  LoaderOptions o;
  o.batch_size = batch;
  o.seq_len = seq_len;
  o.seed = seed;
  o.rank = rank;
  o.world_size = world;
  return o;
}

TEST(TrainLoader, SameSeedSameBatchesOtherSeedOthers) {
  TempDir dir;
  const auto data = counting_dataset(dir, 10007);
  TrainLoader a(data, options(4, 16, 42)), b(data, options(4, 16, 42)), c(data, options(4, 16, 43));
  const auto da = draw(a, 400), db = draw(b, 400), dc = draw(c, 400);  // 400 * 4 windows: 2.5 epochs
  EXPECT_EQ(da, db);
  int same = 0;
  for (size_t k = 0; k < da.size(); ++k) same += da[k] == dc[k];
  EXPECT_LT(same, 5) << "seeds 42 and 43 draw the same batches";
}

TEST(TrainLoader, RowsAreWindowsOfTheStreamOnTheEpochGrid) {
  TempDir dir;
  const int64_t T = 16;
  const auto data = counting_dataset(dir, 10007);
  TrainLoader loader(data, options(4, T, 5));
  uint64_t epoch = 0, position = 0;
  for (int b = 0; b < 700; ++b) {  // past the end of epoch 0 (about 625 windows) and 1
    const Batch batch = loader.next();
    ASSERT_EQ(batch.inputs.shape(), Shape({4, T}));
    ASSERT_EQ(batch.targets.shape(), Shape({4, T}));
    ASSERT_EQ(batch.inputs.dtype(), DType::i32);
    const int32_t* in = batch.inputs.data<int32_t>();
    const int32_t* tg = batch.targets.data<int32_t>();
    for (int64_t row = 0; row < 4; ++row) {
      const uint64_t start = loader.window_start(epoch, position);
      for (int64_t t = 0; t < T; ++t) {
        ASSERT_EQ(in[row * T + t], int32_t(start + t)) << "batch " << b << " row " << row;
        ASSERT_EQ(tg[row * T + t], int32_t(start + t + 1)) << "batch " << b << " row " << row;
      }
      if (++position == loader.windows_in_epoch(epoch)) position = 0, ++epoch;
    }
    EXPECT_EQ(loader.state().epoch, epoch);
    EXPECT_EQ(loader.state().position, position);
    EXPECT_EQ(loader.state().batches, uint64_t(b + 1));
  }
  EXPECT_GE(epoch, 2u);
}

TEST(TrainLoader, EveryWindowOncePerEpochInAnotherOrderEachEpoch) {
  TempDir dir;
  const uint64_t T = 16, N = 10007;
  const auto data = counting_dataset(dir, uint32_t(N));
  const TrainLoader loader(data, options(4, int64_t(T), 9));
  std::vector<uint64_t> first_order;
  std::set<uint64_t> shifts;
  for (uint64_t e = 0; e < 6; ++e) {
    const uint64_t n = loader.windows_in_epoch(e);
    std::vector<uint64_t> starts;
    for (uint64_t p = 0; p < n; ++p) starts.push_back(loader.window_start(e, p));
    const uint64_t shift = *std::min_element(starts.begin(), starts.end());
    shifts.insert(shift);
    ASSERT_LT(shift, T);
    EXPECT_EQ(n, (N - 1 - shift) / T) << "epoch " << e;
    std::vector<uint64_t> sorted = starts;
    std::sort(sorted.begin(), sorted.end());
    for (uint64_t c = 0; c < n; ++c) ASSERT_EQ(sorted[c], shift + c * T) << "epoch " << e << ": not a permutation";
    EXPECT_LE(sorted.back() + T + 1, N);
    if (e == 0) first_order = starts;
    else EXPECT_NE(starts, first_order) << "epoch " << e << " repeats epoch 0's order";
    // A shuffle, not the identity: few windows stay where they were.
    int fixed = 0;
    for (uint64_t p = 0; p < n; ++p) fixed += starts[p] == shift + p * T;
    EXPECT_LT(fixed, 20) << "epoch " << e;
  }
  EXPECT_GT(shifts.size(), 1u) << "the window grid never moves between epochs";
}

TEST(TrainLoader, RestoredStateContinuesTheExactSequence) {
  TempDir dir;
  const auto data = counting_dataset(dir, 10007);
  TrainLoader a(data, options(64, 16, 3));
  draw(a, 5);
  const SamplerState saved = a.state();
  const auto continued = draw(a, 12);  // about 10 batches an epoch: crosses into the next
  EXPECT_GE(a.state().epoch, 1u);

  TrainLoader b(data, options(64, 16, 999));  // the seed comes with the state
  b.restore(saved);
  EXPECT_EQ(draw(b, 12), continued);
  EXPECT_EQ(b.state().batches, 17u);
  EXPECT_EQ(b.state(), a.state());

  // The state is plain data: a byte copy restores as well.
  SamplerState copy;
  std::memcpy(&copy, &saved, sizeof copy);
  TrainLoader c(data, options(64, 16, 0));
  c.restore(copy);
  EXPECT_EQ(draw(c, 12), continued);
}

TEST(TrainLoader, RestoreRefusesAnotherSplitOrSequenceLength) {
  TempDir dir;
  const auto data = counting_dataset(dir, 10007), other = counting_dataset(dir, 5000, "other.bin");
  TrainLoader a(data, options(4, 16, 1));
  a.next();
  TrainLoader b(other, options(4, 16, 1)), c(data, options(4, 32, 1));
  EXPECT_NE(error_of([&] { b.restore(a.state()); }).find("saved on a training split of 10007 tokens, this one has 5000"),
            std::string::npos);
  EXPECT_NE(error_of([&] { c.restore(a.state()); }).find("seq_len 16, this loader has 32"), std::string::npos);
}

// The world-size-1 batch of 6 rows is rank 0's 3 rows then rank 1's 3 rows; likewise for 3 ranks.
TEST(TrainLoader, RanksTogetherReadTheWorldSizeOneBatch) {
  TempDir dir;
  const int64_t T = 8;
  const auto data = counting_dataset(dir, 3001);  // 374 windows an epoch: batches cross epochs
  for (const int world : {2, 3}) {
    const int64_t per_rank = 6 / world;
    TrainLoader single(data, options(6, T, 11));
    std::vector<TrainLoader> ranks;
    for (int r = 0; r < world; ++r) ranks.emplace_back(data, options(per_rank, T, 11, r, world));
    for (int step = 0; step < 200; ++step) {
      const Batch whole = single.next();
      std::vector<int32_t> in, tg;
      for (TrainLoader& rank : ranks) {
        const Batch part = rank.next();
        ASSERT_EQ(part.inputs.shape(), Shape({per_rank, T}));
        const auto pi = rows_of(part.inputs), pt = rows_of(part.targets);
        in.insert(in.end(), pi.begin(), pi.end());
        tg.insert(tg.end(), pt.begin(), pt.end());
        EXPECT_EQ(rank.state(), ranks[0].state());
      }
      ASSERT_EQ(in, rows_of(whole.inputs)) << "world " << world << " step " << step;
      ASSERT_EQ(tg, rows_of(whole.targets)) << "world " << world << " step " << step;
      ASSERT_EQ(ranks[0].state().position, single.state().position);
      ASSERT_EQ(ranks[0].state().epoch, single.state().epoch);
    }
  }
}

TEST(TrainLoader, SmallestSplitAndBadOptions) {
  TempDir dir;
  const auto data = counting_dataset(dir, 17);  // exactly one window of 16 + 1
  TrainLoader loader(data, options(3, 16, 0));
  EXPECT_EQ(loader.windows_in_epoch(0), 1u);
  const Batch b = loader.next();
  for (int64_t row = 0; row < 3; ++row) EXPECT_EQ(b.inputs.data<int32_t>()[row * 16], 0);
  EXPECT_EQ(loader.state().epoch, 3u);
  EXPECT_NE(error_of([&] { TrainLoader l(data, options(1, 17, 0)); }).find("needs at least 18"), std::string::npos);
  EXPECT_NE(error_of([&] { TrainLoader l(data, options(1, 4, 0, 2, 2)); }).find("rank 2"), std::string::npos);
  EXPECT_NE(error_of([&] { TrainLoader l(data, options(0, 4, 0)); }).find("batch_size 0"), std::string::npos);
  const Tensor wrong = Tensor::empty({3, 8}, DType::i32);
  EXPECT_NE(error_of([&] { loader.next(wrong, wrong); }).find("i32[3, 16]"), std::string::npos);
}

// ---- ValLoader ----

std::vector<Drawn> draw_all(ValLoader& loader) {
  std::vector<Drawn> out;
  Batch b;
  while (loader.next(b)) out.push_back({rows_of(b.inputs), rows_of(b.targets)});
  return out;
}

TEST(ValLoader, WalksTheWholeSplitInFixedOrder) {
  TempDir dir;
  const int64_t T = 16, B = 5;
  const auto data = counting_dataset(dir, 1000, "val.bin", 4000);
  ValLoader val(data, options(B, T, 0));
  EXPECT_EQ(val.num_windows(), 999u / 16u);  // 62 windows, tokens 0..992
  EXPECT_EQ(val.num_batches(), 13u);          // 12 full batches and one of 2 rows
  EXPECT_EQ(val.num_target_tokens(), 62u * 16u);
  EXPECT_DOUBLE_EQ(val.bytes_per_token(), 4.0);
  const auto first = draw_all(val);
  ASSERT_EQ(first.size(), 13u);
  uint64_t window = 0;
  for (const Drawn& d : first) {
    ASSERT_EQ(d.inputs.size() % T, 0u);
    for (size_t row = 0; row < d.inputs.size() / T; ++row, ++window)
      for (int64_t t = 0; t < T; ++t) {
        ASSERT_EQ(d.inputs[row * T + t], int32_t(window * T + t));
        ASSERT_EQ(d.targets[row * T + t], int32_t(window * T + t + 1));
      }
  }
  EXPECT_EQ(window, 62u);
  EXPECT_EQ(first.back().inputs.size(), 2u * T);
  val.reset();
  EXPECT_EQ(draw_all(val), first);
  ValLoader again(data, options(B, T, 77));  // the seed plays no part
  EXPECT_EQ(draw_all(again), first);
}

TEST(ValLoader, MaxTokensLimitsTheWindows) {
  TempDir dir;
  const auto data = counting_dataset(dir, 1000, "val.bin");
  LoaderOptions o = options(4, 16, 0);
  o.max_tokens = 100;  // 6 windows of 16
  ValLoader val(data, o);
  EXPECT_EQ(val.num_windows(), 6u);
  const auto all = draw_all(val);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].inputs.size(), 2u * 16u);
  EXPECT_EQ(all[1].inputs.back(), 5 * 16 + 15);
}

TEST(ValLoader, RanksSplitEveryBatchAndCoverTheSplitOnce) {
  TempDir dir;
  const int64_t T = 8;
  const auto data = counting_dataset(dir, 500, "val.bin");  // 62 windows
  ValLoader single(data, options(6, T, 0));
  const auto whole = draw_all(single);
  for (const int world : {2, 3}) {
    std::vector<std::vector<Drawn>> parts;
    for (int r = 0; r < world; ++r) {
      ValLoader rank(data, options(6 / world, T, 0, r, world));
      EXPECT_EQ(rank.num_batches(), single.num_batches());
      parts.push_back(draw_all(rank));
      ASSERT_EQ(parts.back().size(), whole.size()) << "every rank runs the same number of batches";
    }
    for (size_t b = 0; b < whole.size(); ++b) {
      std::vector<int32_t> in, tg;
      for (int r = 0; r < world; ++r) {
        in.insert(in.end(), parts[r][b].inputs.begin(), parts[r][b].inputs.end());
        tg.insert(tg.end(), parts[r][b].targets.begin(), parts[r][b].targets.end());
      }
      EXPECT_EQ(in, whole[b].inputs) << "world " << world << " batch " << b;
      EXPECT_EQ(tg, whole[b].targets) << "world " << world << " batch " << b;
    }
  }
}

// The default corpus as prepared for training: the validation split's bytes per token, per tokenizer.
TEST(ValLoader, BytesPerTokenOfTheDefaultCorpus) {
  LINATTN_REQUIRE_DATA(testing::corpus_dir(), testing::gpt2_dir() / "encoder.json");
  TempDir dir;
  // The 12 validation speeches and one to train on (the whole corpus is tokenized in other tests).
  std::vector<std::string> inputs = {(testing::corpus_dir() / "1790_george_washington_n.txt").string()};
  for (const auto& e : std::filesystem::directory_iterator(testing::corpus_dir()))
    if (e.path().filename().string() >= "2010") inputs.push_back(e.path().string());
  for (const char* tokenizer : {"bytes", "gpt2"}) {
    PrepareOptions o;
    o.inputs = inputs;
    o.tokenizer = tokenizer;
    o.gpt2_dir = testing::gpt2_dir().string();
    o.out_dir = dir / tokenizer;
    o.val_globs = {"201*", "202*"};
    prepare(o);
    const ValLoader val(Dataset::open(o.out_dir, "val"), options(8, 256, 0));
    // 451,085 bytes of text; bytes: one token a byte plus 12 end-of-text; gpt2: the reference
    // encoder's 93,431 tokens for the 12 speeches plus 12 end-of-text.
    const double tokens = std::string(tokenizer) == "bytes" ? 451097.0 : 93443.0;
    EXPECT_DOUBLE_EQ(val.bytes_per_token(), 451085.0 / tokens) << tokenizer;
    const double bpb = bits_per_byte(std::log(double(val.dataset().vocab_size())), val.bytes_per_token());
    EXPECT_GT(bpb, 0.0);
  }
}

}  // namespace
}  // namespace linattn::data
