// The log lines of the libraries gradc runs on. c10d, Gloo (through c10) and ATen's warnings
// write through glog to stderr: "[c10d] The client socket has timed out after 5s ..." printed
// before gradc's own one-line error for the same event, and glog's "Logging before
// InitGoogleLogging()" banner with it. gradc reports every such event itself (rank, collective,
// what to do), so these lines stay out of the terminal unless the user asks for them
// (`gradc train --verbose`, `gradc-run --verbose`).
#pragma once

namespace gradc::runtime {

// verbose: the libraries log as they would on their own (everything at INFO and above);
// otherwise only what ends the process (glog FATAL) is printed. Safe to call any number of
// times, before or after the libraries have logged.
void setLibraryLogging(bool verbose);

}  // namespace gradc::runtime
