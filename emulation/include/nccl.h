// linattn's stand-in for NCCL's nccl.h in the emulation build: the communicator and collectives the
// project calls, with NCCL's names, values and documented semantics, executed on the CPU
// (emulation/nccl.cpp).
//
// Ranks are threads of one process (each calls cudaSetDevice(rank) and ncclCommInitRank with the
// same id, or one thread calls ncclCommInitAll and hands one communicator to each thread) or
// processes (rank 0's ncclGetUniqueId travels over MPI or fork). Either way they meet in a POSIX
// shared-memory segment named from the unique id.
//
// A collective checks its arguments at the call and queues its work on the stream; the work runs
// when something waits on the stream (emulation/internal.h), and then waits for every rank's
// contribution. So each rank's stream must be synchronised by that rank's own thread or process:
// one thread that drives several ranks of one communicator (legal on a GPU inside a group call) is
// refused with ncclInvalidUsage, as it would otherwise wait for itself.
//
// Reductions combine the contributions in rank order, ((x0 op x1) op x2) ..., each step rounded to
// the data type; ncclAvg divides the sum by the rank count (integer division for integer types).
// The result is bitwise identical on every rank. Real NCCL's order depends on the topology and the
// algorithm, but is also fixed for a given one.
//
// A rank that does not arrive within NCCL_EMULATION_TIMEOUT seconds (default 60, fractions allowed)
// makes ncclCommInitRank return ncclRemoteError, or the waiting collective fail its stream, with a
// message naming the missing rank: a crashed peer is an error, not a hang.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#define NCCL_UNIQUE_ID_BYTES 128
struct ncclUniqueId {
  char internal[NCCL_UNIQUE_ID_BYTES];
};

struct ncclComm;
typedef ncclComm* ncclComm_t;

// Fixed to int (as NCCL's are in practice), so that any value a caller passes is a valid one to check.
enum ncclResult_t : int {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
};

enum ncclDataType_t : int {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
};

enum ncclRedOp_t : int { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 };

// The description of a result. For the error the calling thread met last, it is the emulation's own
// message: what was wrong, in which call, and what to do.
const char* ncclGetErrorString(ncclResult_t result);
// The message of the last error met by the calling thread (comm may be null); "" when none.
const char* ncclGetLastError(ncclComm_t comm);

// ---- communicators ----
ncclResult_t ncclGetUniqueId(ncclUniqueId* id);
// Joins rank `rank` of `nranks` on the calling thread's current device, and returns once every
// rank has joined. Two ranks on one device are refused (cudaSetDevice(local rank) first).
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
// ndev communicators of one process, rank i on devlist[i] (or device i when devlist is null).
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);

// ---- group calls: collectives are queued as usual; the calls must nest ----
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();

// ---- collectives: the buffers are device memory; in place where NCCL allows it ----
// recvbuff[i] = op over ranks of sendbuff[i]; in place when sendbuff == recvbuff.
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream);
// recvbuff = root's sendbuff (sendbuff is read on root only); in place when sendbuff == recvbuff.
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
// As ncclAllReduce, but only root's recvbuff is written (and read as an argument).
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream);
// recvbuff[r * sendcount + i] = rank r's sendbuff[i]; in place when sendbuff == recvbuff + rank * sendcount.
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
// recvbuff[i] = op over ranks of sendbuff[rank * recvcount + i]; in place when
// recvbuff == sendbuff + rank * recvcount.
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
