#include "runtime/backends/device_select.h"

namespace gradc::runtime {

Expected<DeviceChoice> parseDeviceChoice(std::string_view text) {
  if (text == "auto") return DeviceChoice{};
  if (const Backend* b = findBackend(text)) return DeviceChoice{b};
  return Error{"unknown device '" + std::string(text) + "': use " + backendNames() + " or auto"};
}

Expected<const Backend*> resolveBackend(DeviceChoice choice, int localRanks) {
  if (choice.automatic()) {
    for (const Backend& b : backends()) {
      if (b.host || !b.built()) continue;
      if (Expected<int> n = b.visibleDevices(); n && *n >= localRanks) return &b;
    }
    return &hostBackend();
  }
  const Backend& b = *choice.backend;
  const std::string flag = "--device " + std::string(b.name) + ": ";
  if (!b.built())
    return Error{flag + std::string(b.missing) + " or use --device " +
                 std::string(hostBackend().name)};
  if (b.host) return &b;
  Expected<int> n = b.visibleDevices();
  if (!n)
    return Error{flag + "no " + (b.name == "cuda" ? std::string("CUDA GPU") : std::string(b.name) + " device") +
                 " is visible (" + n.error().message + "); use --device " + std::string(hostBackend().name)};
  if (localRanks > *n)
    return Error{flag + std::to_string(localRanks) + " ranks on this machine need a device each, but " +
                 std::to_string(*n) + (*n == 1 ? " is" : " are") + " visible (one rank per device: use at most " +
                 std::to_string(*n) + " --devices here)"};
  return &b;
}

Expected<const Device*> selectDevice(DeviceChoice choice, int localRank) {
  Expected<const Backend*> b = resolveBackend(choice, localRank + 1);
  if (!b) return b.error();
  return (*b)->device(localRank);
}

}  // namespace gradc::runtime
