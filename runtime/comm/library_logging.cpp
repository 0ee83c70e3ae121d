#include "runtime/comm/library_logging.h"

#if defined(GRADC_WITH_GLOG)
#include <glog/logging.h>
#endif

namespace gradc::runtime {

void setLibraryLogging(bool verbose) {
#if defined(GRADC_WITH_GLOG)
  // glog drops a message below FLAGS_minloglevel before formatting it, banner included.
  FLAGS_minloglevel = verbose ? google::GLOG_INFO : google::GLOG_FATAL;
#else
  // A LibTorch built without glog (pip torch 2.x) logs through c10 and says little: nothing to quiet.
  (void)verbose;
#endif
}

}  // namespace gradc::runtime
