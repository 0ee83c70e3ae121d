// NcclCommunicator without LibTorch: the library answers, and creating a communicator on a
// machine without a GPU is a clear Error (with a GPU: a one-rank all-reduce works).
#include "runtime/comm/nccl_communicator.h"

#include <doctest/doctest.h>

#include <map>

using namespace gradc;
using namespace gradc::runtime;
using namespace std::chrono_literals;

namespace {

// An in-process store: enough for one rank.
class MapStore final : public KeyValueStore {
 public:
  Status set(const std::string& key, const std::vector<std::uint8_t>& value) override {
    values_[key] = value;
    return Status::success();
  }
  Expected<std::vector<std::uint8_t>> get(const std::string& key) override {
    auto it = values_.find(key);
    if (it == values_.end()) return Error{"no key " + key};
    return it->second;
  }

 private:
  std::map<std::string, std::vector<std::uint8_t>> values_;
};

}  // namespace

TEST_CASE("the NCCL library reports its version") {
  const int version = NcclCommunicator::libraryVersion();
  MESSAGE("NCCL version code " << version);
  CHECK(version >= 20000);
}

TEST_CASE("creating a communicator gives a clear Error without a GPU and works with one") {
  int devices = 0;
  const bool haveGpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  (void)cudaGetLastError();
  MapStore store;
  auto comm = NcclCommunicator::create(0, 1, 0, store, 10s);
  if (!haveGpu) {
    REQUIRE_FALSE(comm.ok());
    const std::string& message = comm.error().message;
    INFO(message);
    CHECK(message.find("rank 0: creating the NCCL communicator (1 ranks, device 0) failed after ") == 0);
    CHECK(message.find("no CUDA device is visible to this process") != std::string::npos);
    return;
  }
  REQUIRE_MESSAGE(comm.ok(), comm.error().message);
  float* buffer = nullptr;
  REQUIRE(cudaMalloc(&buffer, 1024 * sizeof(float)) == cudaSuccess);
  std::vector<float> host(1024, 2.5f);
  REQUIRE(cudaMemcpy(buffer, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  Status s = (*comm)->allReduceSum(buffer, host.size(), NcclDType::Float32, nullptr, "all_reduce test");
  REQUIRE_MESSAGE(s.ok(), s.message());
  std::vector<float> back(1024, 0.0f);
  REQUIRE(cudaMemcpy(back.data(), buffer, back.size() * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back == host);  // one rank: the sum is the input
  CHECK((*comm)->barrier(nullptr, "barrier test").ok());
  cudaFree(buffer);
}
