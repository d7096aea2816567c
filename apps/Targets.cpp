// The target plug-ins (common/Backend.h): one line per built-in target.
#include "ascend/Backend.h"
#include "hopper/Backend.h"
#include "zpu/Backend.h"

namespace tandem {

namespace {

std::vector<TargetBackend> &registry() {
    static std::vector<TargetBackend> all = {
        zpu_backend::backend(),
        hopper_backend::backend(),
        ascend_backend::backend(),
    };
    return all;
}

} // namespace

void register_backend(TargetBackend backend) {
    for (const TargetBackend &b : registry()) {
        if (b.name == backend.name)
            throw Error("target " + backend.name + " has a backend already");
    }
    registry().push_back(std::move(backend));
}

const TargetBackend &backend_of(const Target &target) {
    for (const TargetBackend &b : registry()) {
        if (b.name == target.name())
            return b;
    }
    throw Error("target " + target.name() +
                " has no backend (apps/Targets.cpp lists the built-in ones; "
                "register_backend adds one)");
}

} // namespace tandem
