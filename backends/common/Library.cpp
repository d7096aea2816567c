#include "Library.h"

#include "tandem/Fp8.h"

#include <algorithm>
#include <sstream>

namespace tandem::library {

namespace {

std::string c_ident(const std::string &name) {
    std::string s = name;
    for (char &c : s)
        if (!isalnum(static_cast<unsigned char>(c)))
            c = '_';
    return s;
}

std::string arg_list(const Kernel &kernel) {
    std::string list;
    for (const KernelArg &a : kernel.args)
        list += (list.empty() ? "" : ", ") + std::string("struct halide_buffer_t *") + declared(a);
    return list;
}

/** The type code a caller's buffer has (FP8 bits: uint8). */
std::string type_code(const Halide::Type &type) {
    const Halide::Type t = fp8::storage(type);
    if (t.is_bfloat())
        return "halide_type_bfloat";
    if (t.is_float())
        return "halide_type_float";
    if (t.is_uint())
        return "halide_type_uint";
    return "halide_type_int";
}

bool runtime_dim(const KernelArg &a, size_t d) {
    return d < a.runtime.size() && a.runtime[d];
}

/** A call check's condition as C++ over int64_t extents named c_ident(extent name). */
std::string condition(const Halide::Expr &e) {
    using namespace Halide::Internal;
    auto bin = [](const auto *op, const char *sign) {
        return "(" + condition(op->a) + " " + sign + " " + condition(op->b) + ")";
    };
    auto call = [](const auto *op, const char *fn) {
        return std::string(fn) + "(" + condition(op->a) + ", " + condition(op->b) + ")";
    };
    if (const IntImm *i = e.as<IntImm>())
        return "int64_t(" + std::to_string(i->value) + ")";
    if (const Variable *v = e.as<Variable>())
        return c_ident(v->name);
    if (const Add *op = e.as<Add>())
        return bin(op, "+");
    if (const Sub *op = e.as<Sub>())
        return bin(op, "-");
    if (const Mul *op = e.as<Mul>())
        return bin(op, "*");
    if (const Div *op = e.as<Div>())
        return call(op, "floor_div");
    if (const Mod *op = e.as<Mod>())
        return call(op, "floor_mod");
    if (const Min *op = e.as<Min>())
        return call(op, "std::min");
    if (const Max *op = e.as<Max>())
        return call(op, "std::max");
    if (const EQ *op = e.as<EQ>())
        return bin(op, "==");
    if (const NE *op = e.as<NE>())
        return bin(op, "!=");
    if (const LT *op = e.as<LT>())
        return bin(op, "<");
    if (const LE *op = e.as<LE>())
        return bin(op, "<=");
    if (const GT *op = e.as<GT>())
        return bin(op, ">");
    if (const GE *op = e.as<GE>())
        return bin(op, ">=");
    if (const And *op = e.as<And>())
        return bin(op, "&&");
    if (const Or *op = e.as<Or>())
        return bin(op, "||");
    if (const Not *op = e.as<Not>())
        return "(!" + condition(op->a) + ")";
    if (const Select *op = e.as<Select>())
        return "(" + condition(op->condition) + " ? " + condition(op->true_value) + " : " +
               condition(op->false_value) + ")";
    std::ostringstream text;
    text << e;
    throw Error("library: a call check it cannot print: " + text.str());
}

/** C++ that returns an error code, writing nothing, where the buffers' extents fail one of the
 * kernel's call checks (the region an input must cover). */
std::string call_checks(const Kernel &kernel) {
    if (kernel.call_checks.empty())
        return "";
    std::ostringstream os;
    for (size_t i = 0; i < kernel.args.size(); i++) {
        const KernelArg &a = kernel.args[i];
        for (size_t d = 0; d < a.extents.size(); d++) {
            if (runtime_dim(a, d))
                os << "    [[maybe_unused]] const int64_t " << c_ident(a.extent_name(int(d)))
                   << " = buffers[" << i << "]->dim[" << d << "].extent;\n";
        }
    }
    for (const CallCheck &c : kernel.call_checks) {
        std::string
            at; // " + \"A.extent.0 = \" + std::to_string(A_extent_0)" per extent the check reads
        for (const KernelArg &a : kernel.args) {
            for (size_t d = 0; d < a.extents.size(); d++) {
                const std::string n = a.extent_name(int(d));
                if (runtime_dim(a, d) && Halide::Internal::expr_uses_var(c.holds, n)) {
                    at += std::string(at.empty() ? " + \"" : " + \", ") + declared(a) + ".extent." +
                          std::to_string(d) + " = \" + std::to_string(" + c_ident(n) + ")";
                }
            }
        }
        os << "    if (!" << condition(c.holds) << ")\n"
           << "        return fail(halide_error_code_constraint_violated, std::string(\"" << c.why
           << " (here \")" << at << " + \")\");\n";
    }
    return os.str();
}

} // namespace

const char *dtype_enum(sim::DType t) {
    switch (t) {
    case sim::DType::BF16:
        return "tandem::sim::DType::BF16";
    case sim::DType::F16:
        return "tandem::sim::DType::F16";
    case sim::DType::F32:
        return "tandem::sim::DType::F32";
    case sim::DType::I32:
        return "tandem::sim::DType::I32";
    case sim::DType::U8:
        return "tandem::sim::DType::U8";
    case sim::DType::I8:
        return "tandem::sim::DType::I8";
    case sim::DType::E4M3:
        return "tandem::sim::DType::E4M3";
    case sim::DType::E5M2:
        return "tandem::sim::DType::E5M2";
    }
    return "?";
}

std::vector<const Kernel *> kernels_of(const Kernel &kernel) {
    std::vector<const Kernel *> kernels;
    for (const Kernel &k : kernel.stages)
        kernels.push_back(&k);
    if (kernels.empty())
        kernels.push_back(&kernel);
    return kernels;
}

std::vector<std::string> kernel_functions(const Kernel &kernel, const std::string &function) {
    const std::vector<const Kernel *> kernels = kernels_of(kernel);
    std::vector<std::string> names;
    for (const Kernel *k : kernels) {
        names.push_back(k == kernels.back()
                            ? function
                            : function + c_ident(k->name.substr(kernel.name.size())));
    }
    return names;
}

namespace {
std::string intermediate_name(const KernelArg &a) {
    return "intermediate_" + c_ident(a.name);
}
} // namespace

std::vector<ArgAccess> arg_access(const Kernel &kernel, const Kernel &stage, bool device) {
    std::vector<ArgAccess> access;
    for (const KernelArg &a : stage.args) {
        auto caller = std::find_if(kernel.args.begin(), kernel.args.end(),
                                   [&](const KernelArg &c) { return c.name == a.name; });
        if (caller != kernel.args.end()) {
            const std::string b = "buffers[" + std::to_string(caller - kernel.args.begin()) + "]";
            access.push_back({device ? "reinterpret_cast<void *>(" + b + "->device)" : b + "->host",
                              "elements(" + b + ")", "extents(" + b + ")"});
            continue;
        }
        access.push_back({intermediate_name(a) + (device ? "" : ".data()"),
                          intermediate_name(a) + "_elements", intermediate_name(a) + "_extents"});
    }
    return access;
}

std::string intermediates(const Kernel &kernel) {
    // The caller's runtime extents, then each intermediate's extents in their terms.
    std::string code;
    for (size_t i = 0; i < kernel.args.size(); i++) {
        const KernelArg &a = kernel.args[i];
        for (size_t d = 0; d < a.extents.size(); d++) {
            if (runtime_dim(a, d))
                code += "        [[maybe_unused]] const int64_t " + c_ident(a.extent_name(int(d))) +
                        " = buffers[" + std::to_string(i) + "]->dim[" + std::to_string(d) +
                        "].extent;\n";
        }
    }
    for (const KernelArg &w : kernel.intermediates) {
        std::string extents, elements = "int64_t(1)";
        for (size_t d = 0; d < w.extents.size(); d++) {
            auto runtime = kernel.intermediate_extents.find(w.extent_name(int(d)));
            const std::string e = runtime == kernel.intermediate_extents.end()
                                      ? "int64_t(" + std::to_string(w.extents[d]) + ")"
                                      : condition(runtime->second);
            extents += (d ? ", " : "") + e;
            elements += " * " + e;
        }
        const std::string n = intermediate_name(w);
        code += "        const std::vector<int64_t> " + n + "_extents = {" + extents + "};\n" +
                "        const int64_t " + n + "_elements = " + elements + ";\n" +
                "        std::vector<unsigned char> " + n + "(size_t(" + n + "_elements) * " +
                std::to_string(w.type.bytes()) + "); // " + w.name + ", written by kernel " +
                kernel.name + "_" + c_ident(w.name) + "\n";
    }
    return code;
}

std::string declared(const KernelArg &a) {
    return c_ident(a.name.substr(0, a.name.find('$')));
}

std::string header(const Kernel &kernel, const std::string &fn, const std::string &model) {
    std::ostringstream os;
    os << "// Generated by Tandem: the library interface of kernel " << kernel.name << " for the "
       << kernel.target.name() << ".\n"
       << "#ifndef TANDEM_" << fn << "_H\n#define TANDEM_" << fn << "_H\n\n"
       << "#include <HalideRuntime.h>\n#include <stdint.h>\n\n#ifdef __cplusplus\nextern \"C\" "
          "{\n#endif\n\n"
       << "/** Runs the kernel on " << model << ". Shapes (dense, min 0):\n";
    for (const KernelArg &a : kernel.args) {
        os << " *   " << declared(a) << ": " << (a.output ? "output " : "input ");
        if (fp8::is_fp8(a.type))
            os << "uint8 (" << fp8::name(a.type) << " bits)";
        else
            os << a.type;
        os << " [";
        for (size_t d = 0; d < a.extents.size(); d++)
            os << (d ? " x " : "") << (runtime_dim(a, d) ? "any" : std::to_string(a.extents[d]));
        os << "]\n";
    }
    os << " * Returns 0, or a negative halide_error_code_t (the output untouched). */\n"
       << "int " << fn << "(" << arg_list(kernel) << ");\n"
       << "/** The same call with the arguments as an array of halide_buffer_t pointers (Halide's "
          "_argv). */\n"
       << "int " << fn << "_argv(void **args);\n"
       << "/** The arguments (name, kind, type, rank, and the static extents as estimates) and the "
          "target\n"
       << " * (Halide's _metadata). */\nconst struct halide_filter_metadata_t *" << fn
       << "_metadata(void);\n"
       << "/** The model's cycles of the last successful call. */\nuint64_t " << fn
       << "_last_cycles(void);\n"
       << "/** Where error messages go (default: stderr). */\nvoid " << fn
       << "_set_error_handler(void (*handler)(const char *message));\n\n"
       << "#ifdef __cplusplus\n}\n#endif\n\n#endif\n";
    return os.str();
}

std::string source(const Kernel &kernel, const std::string &fn, const std::string &includes,
                   const std::string &helpers, const std::string &run, Memory memory) {
    const bool device = memory == Memory::Device;
    std::ostringstream os;
    os << "// Generated by Tandem: " << fn << "() over the " << kernel.target.name() << " kernel "
       << kernel.name << ", Halide's calling convention.\n"
       << "#include \"" << fn << ".h\"\n"
       << includes
       << "\n#include <algorithm>\n#include <cstdio>\n#include <cstring>\n#include "
          "<string>\n#include <vector>\n\n"
       << "namespace {\n\n"
       << "void print_error(const char *message) { std::fprintf(stderr, \"%s\\n\", message); }\n"
       << "void (*error_handler)(const char *) = print_error;\nuint64_t last_cycles = 0;\n\n"
       << "[[maybe_unused]] int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 "
          "&& (a % b < 0) != (b < 0)); }\n"
       << "[[maybe_unused]] int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * "
          "b; }\n\n"
       << "int fail(int code, const std::string &message) {\n    error_handler((\"" << fn
       << ": \" + message).c_str());\n    return code;\n}\n\n"
       << "struct Expected {\n    const char *name;\n    halide_type_code_t code;\n    int bits;\n "
          "   int rank;\n    int extents[8];\n};\n\n"
       << "int check(const halide_buffer_t *b, const Expected &e) {\n"
       << "    std::string name = std::string(\"buffer \") + e.name;\n"
       << "    if (!b) return fail(halide_error_code_buffer_argument_is_null, name + \" is "
          "null\");\n"
       << (device ? "    if (!b->device) return fail(halide_error_code_device_malloc_failed, name "
                    "+ \" has no device memory (its device field is the kernel's pointer)\");\n"
                  : "    if (!b->host) return fail(halide_error_code_host_is_null, name + \" has "
                    "no host memory\");\n")
       << "    if (b->type.code != e.code || b->type.bits != e.bits || b->type.lanes != 1)\n"
       << "        return fail(halide_error_code_bad_type, name + \" has the wrong element "
          "type\");\n"
       << "    if (b->dimensions != e.rank)\n"
       << "        return fail(halide_error_code_bad_dimensions, name + \" has \" + "
          "std::to_string(b->dimensions) + \" dimensions, not \" + std::to_string(e.rank));\n"
       << (device ? "    if (b->device % 16 != 0)\n"
                    "        return fail(halide_error_code_constraint_violated, name + \" is not "
                    "16-byte aligned (TMA)\");\n"
                  : "    if (reinterpret_cast<uintptr_t>(b->host) % uintptr_t(e.bits / 8) != 0)\n"
                    "        return fail(halide_error_code_unaligned_host_ptr, name + \" is not "
                    "aligned to its element size\");\n")
       << "    int64_t stride = 1;\n"
       << "    for (int d = 0; d < e.rank; d++) {\n"
       << "        if (e.extents[d] < 0 && b->dim[d].min == 0 && b->dim[d].extent < 1)\n"
       << "            return fail(halide_error_code_buffer_extents_negative, name + \" dimension "
          "\" + std::to_string(d) + \" has extent \" + std::to_string(b->dim[d].extent) + \", the "
          "kernel takes at least 1\");\n"
       << "        if (b->dim[d].min != 0 || (e.extents[d] >= 0 && b->dim[d].extent != "
          "e.extents[d]))\n"
       << "            return fail(halide_error_code_access_out_of_bounds, name + \" dimension \" "
          "+ std::to_string(d) + \" is [\" + std::to_string(b->dim[d].min) + \", +\" + "
          "std::to_string(b->dim[d].extent) + \"), the kernel takes [0, +\" + "
          "std::to_string(e.extents[d]) + \")\");\n"
       << "        if (b->dim[d].stride != stride)\n"
       << "            return fail(halide_error_code_constraint_violated, name + \" dimension \" + "
          "std::to_string(d) + \" has stride \" + std::to_string(b->dim[d].stride) + \", the "
          "kernel takes dense \" + std::to_string(stride));\n"
       << "        stride *= b->dim[d].extent;\n    }\n    return 0;\n}\n\n"
       << "[[maybe_unused]] int64_t elements(const halide_buffer_t *b) {\n    int64_t n = 1;\n"
       << "    for (int d = 0; d < b->dimensions; d++) n *= b->dim[d].extent;\n    return n;\n}\n\n"
       << "[[maybe_unused]] std::vector<int64_t> extents(const halide_buffer_t *b) {\n    "
          "std::vector<int64_t> e;\n"
       << "    for (int d = 0; d < b->dimensions; d++) e.push_back(b->dim[d].extent);\n    return "
          "e;\n}\n\n"
       << helpers << "\n} // namespace\n\n"
       << "extern \"C\" uint64_t " << fn << "_last_cycles(void) { return last_cycles; }\n\n";
    // Halide's _argv and _metadata.
    os << "extern \"C\" int " << fn
       << "_argv(void **args) {\n    if (!args) return fail(halide_error_code_generic_error, "
          "\"args is null\");\n"
       << "    return " << fn << "(";
    for (size_t i = 0; i < kernel.args.size(); i++)
        os << (i ? ", " : "") << "static_cast<halide_buffer_t *>(args[" << i << "])";
    os << ");\n}\n\n";
    for (size_t i = 0; i < kernel.args.size(); i++) {
        const KernelArg &a = kernel.args[i];
        os << "static const int64_t " << fn << "_estimate_" << i << "[] = {";
        for (size_t d = 0; d < a.extents.size(); d++)
            os << (d ? ", " : "") << "0, " << a.extents[d];
        os << "};\nstatic const int64_t *const " << fn << "_estimates_" << i << "[] = {";
        for (size_t d = 0; d < 2 * a.extents.size(); d++)
            os << (d ? ", " : "") << "&" << fn << "_estimate_" << i << "[" << d << "]";
        os << "};\n";
    }
    os << "extern \"C\" const halide_filter_metadata_t *" << fn << "_metadata(void) {\n"
       << "    static const halide_filter_argument_t arguments[] = {\n";
    for (size_t i = 0; i < kernel.args.size(); i++) {
        const KernelArg &a = kernel.args[i];
        os << "        {\"" << declared(a) << "\", "
           << (a.output ? "halide_argument_kind_output_buffer"
                        : "halide_argument_kind_input_buffer")
           << ", " << a.extents.size() << ", halide_type_t(" << type_code(a.type) << ", "
           << a.type.bits() << ", 1), nullptr, nullptr, nullptr, nullptr, " << fn << "_estimates_"
           << i << "},\n";
    }
    os << "    };\n    static const halide_filter_metadata_t metadata = "
          "{halide_filter_metadata_t::VERSION, "
       << kernel.args.size() << ", arguments, \"" << kernel.target.name() << "\", \"" << fn
       << "\"};\n"
       << "    return &metadata;\n}\n\n";
    os << "extern \"C\" void " << fn
       << "_set_error_handler(void (*handler)(const char *)) {\n    error_handler = handler ? "
          "handler : print_error;\n}\n\n"
       << "extern \"C\" int " << fn << "(" << arg_list(kernel) << ") {\n"
       << "    halide_buffer_t *buffers[] = {";
    for (size_t i = 0; i < kernel.args.size(); i++)
        os << (i ? ", " : "") << declared(kernel.args[i]);
    os << "};\n    static const Expected expected[] = {\n";
    for (const KernelArg &a : kernel.args) {
        os << "        {\"" << declared(a) << "\", " << type_code(a.type) << ", " << a.type.bits()
           << ", " << a.extents.size() << ", {";
        for (size_t d = 0; d < a.extents.size(); d++)
            os << (d ? ", " : "") << (runtime_dim(a, d) ? -1 : a.extents[d]);
        os << "}},\n";
    }
    os << "    };\n"
       << "    for (size_t i = 0; i < " << kernel.args.size() << "; i++) {\n"
       << "        if (int code = check(buffers[i], expected[i])) return code;\n    }\n"
       << call_checks(kernel) << "    try {\n"
       << run << "    } catch (const std::exception &e) {\n"
       << "        return fail(halide_error_code_generic_error, e.what());\n    }\n"
       << "    return 0;\n}\n";
    return os.str();
}

} // namespace tandem::library
