#include "GenMain.h"

#include "common/Backend.h"
#include "tandem/AsyncIR.h"
#include "tandem/Generator.h"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace tandem {

namespace {

std::string describe_generators() {
    std::ostringstream os;
    os << "generators:\n";
    for (const std::string &name : GeneratorRegistry::names()) {
        std::unique_ptr<GeneratorBase> g = GeneratorRegistry::create(name);
        os << "  " << name << "\n";
        for (const GeneratorParamInfo &p : g->params()) {
            os << "    " << p.name << " (" << p.kind << ") = " << p.default_value;
            if (p.min || p.max) os << "  in [" << (p.min ? std::to_string(*p.min) : "") << ", " << (p.max ? std::to_string(*p.max) : "") << "]";
            if (!p.choices.empty()) {
                os << "  one of";
                for (const std::string &c : p.choices) os << " " << c;
            }
            os << "\n";
        }
    }
    return os.str();
}

void write_file(const std::filesystem::path &path, const std::string &text) {
    std::ofstream out(path);
    out << text;
    if (!out) throw Error("cannot write " + path.string());
}

} // namespace

int generator_main(int argc, char **argv) {
    CLI::App app{"Tandem generator: builds a registered generator for a target and writes its outputs"};
    app.set_help_flag("-h,--help", "the generators and their parameters, then the flags (also -help)");
    std::string name, dir, function, emit = "stmt,code";
    std::vector<std::string> assignments;
    app.add_option("-g", name, "the generator to build")->required();
    app.add_option("-o", dir, "the directory the outputs go to")->required();
    app.add_option("-f", function, "the function and file base name (default: the generator's name)");
    app.add_option("-e", emit, "outputs, comma-separated: stmt, halide, and the target's sources (code, cuda)");
    app.add_option("assignments", assignments, "target=T[:k=v,...] and the generator's param=value");
    app.footer(describe_generators());
    std::vector<std::string> args; // CLI11 wants them last to first; Halide's GenGen takes -help
    for (int i = argc - 1; i > 0; i--) args.push_back(std::string(argv[i]) == "-help" ? "--help" : argv[i]);
    try {
        app.parse(args);
    } catch (const CLI::ParseError &e) {
        return app.exit(e);
    }
    try {
        std::unique_ptr<GeneratorBase> g = GeneratorRegistry::create(name);
        std::string target_text = "zpu";
        for (const std::string &a : assignments) {
            size_t eq = a.find('=');
            if (eq == std::string::npos) throw Error("'" + a + "' is not key=value (target=... or a parameter)");
            if (a.substr(0, eq) == "target")
                target_text = a.substr(eq + 1);
            else
                g->set_param(a.substr(0, eq), a.substr(eq + 1));
        }
        Target target = Target::parse(target_text);
        if (function.empty()) function = name;
        Kernel kernel = g->compile(target, function);
        std::filesystem::create_directories(dir);
        const TargetBackend &backend = backend_of(target);
        std::stringstream kinds(emit);
        std::string kind;
        while (std::getline(kinds, kind, ',')) {
            std::filesystem::path base = std::filesystem::path(dir) / function;
            if (kind == "stmt") {
                write_file(base.string() + ".stmt", kernel.stmt_text());
                continue;
            }
            if (kind == "halide") {
                write_file(base.string() + ".halide.stmt", ir::to_string(kernel.halide_stmt));
                continue;
            }
            bool found = false;
            std::string known = "stmt, halide";
            for (const Source &source : backend.sources) {
                known += ", " + source.what;
                if (source.what != kind) continue;
                write_file(base.string() + source.suffix, source.emit(kernel, function, EmitOptions{}));
                found = true;
            }
            if (!found && kind == "static_library") {
                std::string sources;
                for (const Source &source : backend.sources) sources += (sources.empty() ? "" : ",") + source.what;
                throw Error("-e static_library: Tandem writes the library's sources (-e " + sources +
                            ") and CMake compiles them: add_tandem_library (README, Writing a generator)");
            }
            if (!found) throw Error("-e " + kind + ": target " + target.name() + " emits " + known);
        }
    } catch (const Error &e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}

} // namespace tandem
