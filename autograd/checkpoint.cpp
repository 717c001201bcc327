#include "autograd/checkpoint.h"

#include "autograd/saved.h"
#include "core/error.h"
#include "kernels/backend.h"

namespace linattn::ops {

namespace {

// One checkpointed region: what its first run kept for the replay.
struct Region {
  Recompute mode;
  std::vector<Tensor> kept;  // in the order the ops kept them; bf16 ones are float32 rounded (keep)
  size_t next = 0;           // the replay's position in `kept`
};

// The region whose forward runs on this thread, and whether it is the replay.
thread_local Region* t_region = nullptr;
thread_local bool t_replaying = false;

class RegionScope {
 public:
  RegionScope(Region& region, bool replaying) : region_(t_region), replaying_(t_replaying) {
    t_region = &region;
    t_replaying = replaying;
  }
  ~RegionScope() {
    t_region = region_;
    t_replaying = replaying_;
  }
  RegionScope(const RegionScope&) = delete;
  RegionScope& operator=(const RegionScope&) = delete;

 private:
  Region* region_;
  bool replaying_;
};

bool keeps(const Region* r, detail::Kept) { return r && r->mode == Recompute::selective; }

// What the region's node holds until it has run.
struct Replay {
  std::function<Variable(const Variable&)> f;
  detail::Saved x;  // in bf16 in a SaveInBf16 scope (the replay then starts from the rounded input)
  Variable out;
  Region region;
};

}  // namespace

const char* recompute_name(Recompute mode) {
  return mode == Recompute::full ? "full" : mode == Recompute::selective ? "selective" : "none";
}

namespace detail {

bool take_kept(Kept kind, Tensor& out, Tensor* copy, bool widen) {
  if (!t_replaying || !keeps(t_region, kind)) return false;
  Region& r = *t_region;
  LINATTN_CHECK(r.next < r.kept.size(), "recompute: the replay of a checkpointed region asks for more kept outputs "
                "than its first run kept (", r.kept.size(), "): the region must make the same ops on every run");
  Tensor kept = std::move(r.kept[r.next++]);
  if (kept.dtype() == DType::bf16 && widen) {  // widened back (keep rounded it)
    out = Tensor::scratch(kept.shape(), DType::f32, kept.device());
    backend::convert(kept.device(), out, kept);
    if (copy) *copy = std::move(kept);
  } else {
    out = std::move(kept);  // the replay's node holds it from here
  }
  return true;
}

void keep(Kept kind, const Tensor& out, Tensor* copy) {
  if (t_replaying || !keeps(t_region, kind)) return;
  if (!saving_in_bf16() || out.dtype() != DType::f32) {
    t_region->kept.push_back(out);
    return;
  }
  if (copy && copy->defined()) {
    t_region->kept.push_back(*copy);
    return;
  }
  Tensor rounded = Tensor::scratch_kept(out.shape(), DType::bf16, out.device());
  backend::convert(out.device(), rounded, out);
  if (copy) *copy = rounded;
  t_region->kept.push_back(std::move(rounded));
}

bool keeping(Kept kind) { return !t_replaying && keeps(t_region, kind); }

void keep_exact(Kept kind, const Tensor& out) {
  if (!t_replaying && keeps(t_region, kind)) t_region->kept.push_back(out);
}

}  // namespace detail

Variable checkpoint(Recompute mode, std::function<Variable(const Variable&)> f, const Variable& x,
                    const std::vector<Variable>& params) {
  bool differentiable = x.requires_grad();
  for (const Variable& p : params) differentiable = differentiable || p.requires_grad();
  if (mode == Recompute::none || !grad_enabled() || !differentiable) return f(x);

  auto replay = std::make_shared<Replay>();
  replay->region.mode = mode;
  Variable y;
  {
    NoGrad no_grad;
    RegionScope scope(replay->region, false);
    y = f(x);
  }
  Variable out(y.value(), true);
  replay->f = std::move(f);
  replay->x = detail::Saved(x);
  replay->out = out.without_value();  // its backward reads only the gradient
  std::vector<const Variable*> inputs{&x};
  for (const Variable& p : params) inputs.push_back(&p);
  record(inputs, [state = std::move(replay)]() mutable {
    // The node runs once: everything it holds goes when it returns.
    const std::shared_ptr<Replay> r = std::move(state);
    if (!r || !r->out.grad().defined()) return;
    TapeScope tape;
    Variable replayed;
    {
      RegionScope scope(r->region, true);
      replayed = r->f(r->x.with_value());
    }
    LINATTN_CHECK(r->region.next == r->region.kept.size(), "recompute: the replay of a checkpointed region used ",
                  r->region.next, " of the ", r->region.kept.size(), " outputs its first run kept: the region must "
                  "make the same ops on every run");
    r->region.kept.clear();
    // forward: out = f(x)  =>  the replay's tape, seeded with d(out), accumulates dx and the parameters'
    // gradients; the replayed tensors go with the tape.
    backward({replayed}, {r->out.grad()});
  });
  return out;
}

}  // namespace linattn::ops
