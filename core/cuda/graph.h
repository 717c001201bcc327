// CUDA graphs: the compute stream's work recorded once (stream capture) and replayed as one launch.
// A replay runs the captured kernels, copies and products with the arguments and addresses they had
// at the capture, so what changes from one replay to the next must live in device memory written
// before the launch (the step's tokens, the learning rate), and the host may neither read nor wait
// for the device while it captures. The allocator keeps the memory a graph uses for it
// (core/cuda/runtime.h). Declared without CUDA types; without the CUDA backend it throws.
#pragma once

#include <cstddef>

namespace linattn::cuda {

class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(Graph&& o) noexcept;
  Graph& operator=(Graph&& o) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Starts recording the current device's compute stream: its work is kept, not run, until
  // end_capture or abandon_capture.
  static void begin_capture();
  // Ends the recording and instantiates what it holds. Throws linattn::Error when the capture was
  // broken (a call during it that a graph cannot hold, named by the error that call threw).
  static Graph end_capture();
  // Ends a recording broken by an error (an exception out of the work being captured): nothing of
  // it runs. A no-op when nothing records.
  static void abandon_capture();

  // Queues the replay on the compute stream.
  void launch() const;
  bool empty() const { return exec_ == nullptr; }
  size_t operations() const { return operations_; }  // the stream operations it holds

 private:
  void reset();
  void* graph_ = nullptr;
  void* exec_ = nullptr;
  size_t operations_ = 0;
};

}  // namespace linattn::cuda
