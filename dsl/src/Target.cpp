#include "tandem/Target.h"

#include "../lower/Targets.h"

#include <sstream>

namespace tandem {

int Target::units() const {
    return int(machine.integer(machine.role("units")));
}

int Target::vector_units() const {
    return machine.has_role("vector_units") ? int(machine.integer(machine.role("vector_units")))
                                            : units();
}

int64_t Target::vector_memory_bytes() const {
    return machine.integer(machine.role("vector_memory"));
}

std::function<double(const std::string &)> Target::lookup() const {
    return [machine = machine](const std::string &key) { return machine.number(key); };
}

Target Target::parse(const std::string &text) {
    const std::string name = text.substr(0, text.find(':'));
    Target t;
    t.machine = MachineDescription::builtin(name); // Error naming the known targets
    if (text.find(':') == std::string::npos)
        return t;
    std::stringstream rest(text.substr(text.find(':') + 1));
    std::string item;
    while (std::getline(rest, item, ',')) {
        auto eq = item.find('=');
        if (eq == std::string::npos)
            throw Error("target " + name + ": parameter '" + item + "' is not key=value");
        const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
        if (key == "file")
            t.machine.merge_file(value);
        else
            t.machine.set(key, value);
    }
    return t;
}

std::vector<std::string> Target::names() {
    return lower::target_names();
}

bool Target::takes(const std::string &directive) const {
    const lower::TargetLowering &t = lower::lowering_of(*this);
    if (directive == "cluster")
        return t.clusters;
    if (directive == "cooperative")
        return t.cooperative;
    if (directive == "runtime_shapes")
        return t.runtime_shapes;
    throw Error("Target::takes: '" + directive +
                "' is not a directive some targets lack (cluster, cooperative, runtime_shapes)");
}

} // namespace tandem
