#include "autograd/segments.h"

#include <algorithm>
#include <limits>

#include "core/cuda/runtime.h"
#include "core/error.h"

namespace linattn::ops {

namespace {

// Writes the offsets into the i32 table t, the entries past them set to the last (empty sequences).
void write_table(const std::vector<int64_t>& offsets, const Tensor& t) {
  LINATTN_CHECK(offsets.back() <= std::numeric_limits<int32_t>::max(), "segments: the batch's ", offsets.back(),
                " positions exceed the kernels' 32-bit offsets; use fewer rows or shorter ones");
  std::vector<int32_t> host(size_t(t.numel()), int32_t(offsets.back()));
  std::copy(offsets.begin(), offsets.end(), host.begin());
  if (t.device() == Device::cpu) std::copy(host.begin(), host.end(), t.data<int32_t>());
  else cuda::upload_pageable(t.raw(), host.data(), host.size() * sizeof(int32_t));
}

}  // namespace

Segments& Segments::to(Device device) {
  if (offsets.empty() || (table.defined() && table.device() == device)) return *this;
  if (table.defined()) {
    table = table.to(device);  // as it is, its padding included
  } else {
    table = Tensor::empty({int64_t(offsets.size())}, DType::i32, device);
    write_table(offsets, table);
  }
  return *this;
}

bool Segments::stage(const Tensor& buffer) {
  LINATTN_CHECK(!offsets.empty(), "Segments::stage: the rows have no table to stage");
  LINATTN_CHECK(buffer.ndim() == 1 && buffer.dtype() == DType::i32 && buffer.numel() >= 2,
                "Segments::stage: the buffer must be i32 [capacity + 1], got ", buffer.str());
  if (int64_t(offsets.size()) > buffer.numel()) return false;
  write_table(offsets, buffer);
  table = buffer;
  return true;
}

Sequences Segments::sequences(Device device, Tensor& holder) const {
  if (offsets.empty()) return {};
  holder = table.defined() && table.device() == device ? table : Segments(*this).to(device).table;
  return {holder.data<int32_t>(), holder.numel() - 1};
}

Segments Segments::starting_at(const Tensor& ids, int32_t token, Device device) {
  LINATTN_CHECK(ids.ndim() == 2 && ids.dtype() == DType::i32, "Segments::starting_at: ids must be i32 [B, T], got ",
                ids.str());
  const int64_t B = ids.shape()[0], T = ids.shape()[1];
  const int32_t* p = ids.data<int32_t>();
  Segments s;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      if (t == 0 || p[b * T + t] == token) s.offsets.push_back(b * T + t);
  s.offsets.push_back(B * T);
  s.to(device);
  return s;
}

void check_segments(const Segments& segments, int64_t B, int64_t T) { segment_parts(segments, B, T); }

std::vector<SegmentPart> segment_parts(const Segments& segments, int64_t B, int64_t T) {
  if (segments.offsets.empty()) return {{0, B, T, 0, true, true}};
  const std::vector<int64_t>& o = segments.offsets;
  LINATTN_CHECK(o.front() == 0 && o.back() == B * T, "segments: offsets must run from 0 to B * T = ", B * T,
                ", got ", o.front(), " .. ", o.back());
  std::vector<SegmentPart> parts;
  int64_t row = 0;  // the next row that must start a sequence
  for (size_t i = 0; i + 1 < o.size(); ++i) {
    const int64_t start = o[i], len = o[i + 1] - start, r = start / T;
    LINATTN_CHECK(len > 0, "segments: offsets must increase, got ", start, " then ", o[i + 1]);
    LINATTN_CHECK((start + len - 1) / T == r, "segments: the sequence at ", start, " (", len,
                  " tokens) crosses the end of row ", r, "; every row start must be an offset");
    const bool first = start % T == 0, last = (start + len) % T == 0;
    if (first) {
      LINATTN_CHECK(r == row, "segments: row ", row, " does not start a sequence");
      ++row;
    }
    SegmentPart* prev = parts.empty() ? nullptr : &parts.back();
    if (first && last && prev && prev->len == T && prev->first)
      ++prev->rows;  // whole rows in a row: one call
    else
      parts.push_back({start, 1, len, r, first, last});
  }
  return parts;
}

}  // namespace linattn::ops
