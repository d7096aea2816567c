// The target plug-ins (common/Backend.h): one line per target.
#include "ascend/Backend.h"
#include "hopper/Backend.h"
#include "zpu/Backend.h"

namespace tandem {

const TargetBackend &backend_of(const Target &target) {
    static const std::vector<TargetBackend> all = {
        zpu_backend::backend(),
        hopper_backend::backend(),
        ascend_backend::backend(),
    };
    for (const TargetBackend &b : all) {
        if (b.name == target.name())
            return b;
    }
    throw Error("target " + target.name() + " has no backend (apps/Targets.cpp lists them)");
}

} // namespace tandem
