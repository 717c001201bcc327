#include "train/grad_buckets.h"

namespace linattn {

GradientBuckets::GradientBuckets(const Parameters& params, int64_t bucket_bytes, Communicator& comm)
    : params_(params), comm_(comm), bucket_of_(params.size()) {
  LINATTN_CHECK(params.allocated() && params.size() > 0, "GradientBuckets needs allocated parameters");
  LINATTN_CHECK(bucket_bytes > 0, "bucket size must be positive, got ", bucket_bytes, " bytes");
  // Refused here rather than at the first step's sum.
  const Device device = params.grads().all().device();
  LINATTN_CHECK(comm.sums_on(device), "the ", comm.backend(), " communicator cannot sum gradients on ",
                device_name(device), ": gradients on a GPU are summed with NCCL (make_nccl_communicator)");
  const auto& entries = params.layout().entries();
  const int64_t elem_bytes = int64_t(dtype_size(params.grads().all().dtype()));
  for (int i = int(params.size()) - 1; i >= 0; --i) {
    const FlatLayout::Entry& e = entries[size_t(i)];
    if (buckets_.empty() || (buckets_.back().end - buckets_.back().begin) * elem_bytes >= bucket_bytes)
      buckets_.push_back({e.offset, e.offset + e.shape.numel(), {}});
    Bucket& b = buckets_.back();
    b.begin = e.offset;  // the padding between parameters is zero on every rank: summing it is harmless
    b.params.push_back(i);
    bucket_of_[size_t(i)] = buckets_.size() - 1;
  }
  unfinished_.resize(buckets_.size());
  for (size_t b = 0; b < buckets_.size(); ++b) unfinished_[b] = buckets_[b].params.size();

  for (size_t i = 0; i < params.size(); ++i) hooks_.leaves.push_back(params[int(i)]);
  hooks_.final_grad = [this](size_t param) { on_final(param); };
  hooks_.after_node = [this] { comm_.poll(); };
}

void GradientBuckets::on_final(size_t param) {
  --unfinished_[bucket_of_[param]];
  while (next_ < buckets_.size() && unfinished_[next_] == 0) start_next();
}

void GradientBuckets::start_next() {
  const Bucket& b = buckets_[next_++];
  comm_.start_allreduce_sum(params_.grads().all().narrow(b.begin, b.end));
}

void GradientBuckets::finish() {
  while (next_ < buckets_.size()) start_next();
  comm_.wait_all();
  next_ = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) unfinished_[b] = buckets_[b].params.size();
}

}  // namespace linattn
