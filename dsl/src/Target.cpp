#include "tandem/Target.h"

#include <sstream>

namespace tandem {

namespace {

void set_zpu_param(sim::ZpuParams &p, const std::string &key, const std::string &value) {
    int64_t v = 0;
    try {
        v = std::stoll(value);
    } catch (const std::exception &) {
        throw Error("target zpu: parameter '" + key + "' needs an integer value, got '" + value + "'");
    }
    if (v <= 0) {
        throw Error("target zpu: parameter '" + key + "' must be positive, got " + value);
    }
    if (key == "cores") p.cores = int(v);
    else if (key == "dma_channels") p.dma_channels = int(v);
    else if (key == "dma_queue_depth") p.dma_queue_depth = int(v);
    else if (key == "asram_bytes") p.asram_bytes = v;
    else if (key == "wsram_bytes") p.wsram_bytes = v;
    else if (key == "rsram_bytes") p.rsram_bytes = v;
    else
        throw Error("target zpu: unknown parameter '" + key +
                    "' (known: cores, dma_channels, dma_queue_depth, asram_bytes, wsram_bytes, "
                    "rsram_bytes)");
}

void set_hopper_param(sim::hopper::HopperParams &p, const std::string &key, const std::string &value) {
    int64_t v = 0;
    try {
        v = std::stoll(value);
    } catch (const std::exception &) {
        throw Error("target hopper: parameter '" + key + "' needs an integer value, got '" + value + "'");
    }
    if (v <= 0) throw Error("target hopper: parameter '" + key + "' must be positive, got " + value);
    if (key == "sms") p.sms = int(v);
    else if (key == "smem_bytes") p.smem_bytes = v;
    else throw Error("target hopper: unknown parameter '" + key + "' (known: sms, smem_bytes)");
}

} // namespace

Target Target::parse(const std::string &text) {
    std::string arch = text.substr(0, text.find(':'));
    Target t;
    if (arch == "zpu") {
        t.arch = Arch::ZPU;
    } else if (arch == "hopper") {
        t.arch = Arch::Hopper;
    } else if (arch == "ascend") {
        t.arch = Arch::Ascend;
    } else {
        throw Error("unknown target '" + arch + "' (known: zpu, hopper, ascend)");
    }
    if (text.find(':') == std::string::npos) return t;
    if (t.arch == Arch::Ascend) {
        std::stringstream rest(text.substr(text.find(':') + 1));
        std::string item;
        while (std::getline(rest, item, ',')) {
            auto eq = item.find('=');
            if (eq == std::string::npos || item.substr(0, eq) != "cores") {
                throw Error("target ascend: unknown parameter '" + item + "' (known: cores=N)");
            }
            t.ascend.cores = std::stoi(item.substr(eq + 1));
            if (t.ascend.cores <= 0) throw Error("target ascend: cores must be positive");
        }
        return t;
    }
    std::stringstream rest(text.substr(text.find(':') + 1));
    std::string item;
    while (std::getline(rest, item, ',')) {
        auto eq = item.find('=');
        if (eq == std::string::npos) throw Error("target " + arch + ": parameter '" + item + "' is not key=value");
        if (t.arch == Arch::ZPU) set_zpu_param(t.zpu, item.substr(0, eq), item.substr(eq + 1));
        else set_hopper_param(t.hopper, item.substr(0, eq), item.substr(eq + 1));
    }
    return t;
}

std::string Target::name() const {
    switch (arch) {
    case Arch::ZPU: return "zpu";
    case Arch::Hopper: return "hopper";
    case Arch::Ascend: return "ascend";
    }
    return "?";
}

} // namespace tandem
