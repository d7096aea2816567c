#ifndef TANDEM_ASCEND_BACKEND_H
#define TANDEM_ASCEND_BACKEND_H

#include "common/Backend.h"

namespace tandem::ascend_backend {

/** The Ascend target plug-in. */
TargetBackend backend();

} // namespace tandem::ascend_backend

#endif
