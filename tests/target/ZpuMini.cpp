// A fourth target, registered from this file alone: the ZPU's passes and backend under the name
// "zpu_mini", with its own machine file (zpu_mini.json: 4 cores). Linked into the fourth-target
// test and into a generator binary; no other file of Tandem names it.
#include "lower/Targets.h"
#include "lower/zpu/ZpuTarget.h"
#include "zpu/Backend.h"

#include <fstream>
#include <sstream>

namespace {

using namespace tandem;

std::string machine_file() {
    std::ifstream in(TANDEM_ZPU_MINI_JSON);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

lower::TargetLowering lowering() {
    lower::TargetLowering t = lower::zpu_target();
    t.name = "zpu_mini";
    t.machine_json = machine_file();
    return t;
}

TargetBackend backend() {
    TargetBackend b = zpu_backend::backend();
    b.name = "zpu_mini";
    return b;
}

const lower::RegisterTarget registered_lowering(lowering());
const RegisterBackend registered_backend(backend());

} // namespace
