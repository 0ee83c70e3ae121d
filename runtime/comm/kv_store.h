// A small key-value store for rendezvous data (e.g. the NCCL unique id that rank 0 creates and
// every rank needs). Abstract and std-only, so code that uses it (runtime/nccl_communicator)
// needs no LibTorch; runtime/comm/tcp_kv_store.h implements it over c10d::TCPStore.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/status.h"

namespace gradc::runtime {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  virtual Status set(const std::string& key, const std::vector<std::uint8_t>& value) = 0;
  // Waits until the key is set, up to the store's timeout; a timeout is an Error.
  virtual Expected<std::vector<std::uint8_t>> get(const std::string& key) = 0;
};

}  // namespace gradc::runtime
