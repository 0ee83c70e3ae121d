#include "runtime/library_logging.h"

#include <glog/logging.h>

namespace gradc::runtime {

void setLibraryLogging(bool verbose) {
  // glog drops a message below FLAGS_minloglevel before formatting it, banner included.
  FLAGS_minloglevel = verbose ? google::GLOG_INFO : google::GLOG_FATAL;
}

}  // namespace gradc::runtime
