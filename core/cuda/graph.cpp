#include "core/cuda/graph.h"

#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/error.h"

#ifdef LINATTN_CUDA

#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "core/cuda/check.h"

namespace linattn::cuda {

namespace {
cudaStream_t stream() { return static_cast<cudaStream_t>(compute_stream()); }
}  // namespace

Graph::~Graph() { reset(); }

Graph::Graph(Graph&& o) noexcept
    : graph_(std::exchange(o.graph_, nullptr)),
      exec_(std::exchange(o.exec_, nullptr)),
      operations_(std::exchange(o.operations_, 0)) {}

Graph& Graph::operator=(Graph&& o) noexcept {
  if (this != &o) {
    reset();
    graph_ = std::exchange(o.graph_, nullptr);
    exec_ = std::exchange(o.exec_, nullptr);
    operations_ = std::exchange(o.operations_, 0);
  }
  return *this;
}

void Graph::reset() {
  if (!exec_) return;
  // A replay still queued keeps running: CUDA destroys the executable graph after it.
  cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  exec_ = graph_ = nullptr;
  release_graph_memory();
}

void Graph::begin_capture() {
  // Relaxed: the allocator may still cudaMalloc a block the capture needs.
  LINATTN_CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeRelaxed));
  begin_graph_memory();
}

Graph Graph::end_capture() {
  cudaGraph_t graph = nullptr;
  const cudaError_t err = cudaStreamEndCapture(stream(), &graph);
  if (err != cudaSuccess) {
    end_graph_memory(false);
    LINATTN_FAIL("CUDA graph capture failed: ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  }
  Graph g;
  g.graph_ = graph;
  size_t nodes = 0;
  cudaGraphExec_t exec = nullptr;
  cudaError_t failed = cudaGraphInstantiate(&exec, graph, 0);
  if (failed == cudaSuccess) failed = cudaGraphGetNodes(graph, nullptr, &nodes);
  if (failed != cudaSuccess) {
    if (exec) cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    g.graph_ = nullptr;
    end_graph_memory(false);
    LINATTN_FAIL("CUDA graph instantiation failed: ", cudaGetErrorName(failed), " (", cudaGetErrorString(failed), ")");
  }
  g.exec_ = exec;
  g.operations_ = nodes;
  end_graph_memory(true);
  return g;
}

void Graph::abandon_capture() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream(), &status) != cudaSuccess || status == cudaStreamCaptureStatusNone) return;
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(stream(), &graph);
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();  // the capture's error is the one already thrown
  end_graph_memory(false);
}

void Graph::launch() const {
  LINATTN_CHECK(exec_, "cuda::Graph::launch: an empty graph");
  LINATTN_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), stream()));
}

}  // namespace linattn::cuda

#else  // without the CUDA backend

namespace linattn::cuda {

Graph::~Graph() = default;
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;
void Graph::reset() {}
void Graph::begin_capture() {
  LINATTN_FAIL("a CUDA graph: linattn was built without CUDA (configure with -DLINATTN_CUDA=ON on a machine with nvcc)");
}
Graph Graph::end_capture() { return {}; }
void Graph::abandon_capture() {}
void Graph::launch() const {}

}  // namespace linattn::cuda

#endif  // LINATTN_CUDA
