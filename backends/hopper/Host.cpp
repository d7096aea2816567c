#include "Host.h"

#include "CudaExpr.h"
#include "Emitter.h"
#include "common/Library.h"

#include <algorithm>
#include <sstream>

namespace tandem::hopper_backend {

namespace {

const char *tensor_map_type(const Halide::Type &t) {
    if (t.is_bfloat() && t.bits() == 16)
        return "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16";
    if (t.is_float() && t.bits() == 16)
        return "CU_TENSOR_MAP_DATA_TYPE_FLOAT16";
    if (t.is_float() && t.bits() == 32)
        return "CU_TENSOR_MAP_DATA_TYPE_FLOAT32";
    if (t.is_int() && t.bits() == 32)
        return "CU_TENSOR_MAP_DATA_TYPE_INT32";
    if (t.bits() == 8) // TMA moves bytes: int8 as uint8 (out-of-bounds fill is 0 either way)
        return "CU_TENSOR_MAP_DATA_TYPE_UINT8";
    throw Error("hopper: TMA has no element type for " + type_text(t));
}

/** launch_<fn>: prepare, launch and release in one call. */
std::string launch_in_one(const std::string &fn, bool extents) {
    std::ostringstream os;
    os << "extern \"C\" cudaError_t launch_" << fn << "(void *const *args, "
       << (extents ? "const int *extents, " : "") << "cudaStream_t stream) {\n"
       << "    void *prepared = nullptr;\n"
       << "    cudaError_t status = prepare_" << fn << "(args, " << (extents ? "extents, " : "")
       << "&prepared);\n"
       << "    if (status == cudaSuccess) status = launch_prepared_" << fn
       << "(prepared, stream);\n"
       << "    release_" << fn << "(prepared);\n"
       << "    return status;\n"
       << "}\n";
    return os.str();
}

} // namespace

std::vector<KernelParam> kernel_params(const Kernel &kernel, const Plan &plan) {
    std::vector<KernelParam> members;
    for (const TensorMap &m : plan.maps) {
        members.push_back(
            {"const __grid_constant__ CUtensorMap " + m.name, "CUtensorMap", m.name, m.name});
        if (m.last_box)
            members.push_back({"const __grid_constant__ CUtensorMap " + m.last_name, "CUtensorMap",
                               m.last_name, m.last_name});
    }
    for (size_t i = 0; i < kernel.args.size(); i++) {
        const KernelArg &a = kernel.args[i];
        if (!plan.thread_args.count(a.name))
            continue;
        const std::string t = storage_type(a.type), name = c_name(a.name) + "_global";
        members.push_back({(a.output ? "" : "const ") + t + " *__restrict__ " + name, t + " *",
                           name, "static_cast<" + t + " *>(args[" + std::to_string(i) + "])"});
    }
    for (const std::string &name : kernel.runtime_extent_names())
        members.push_back({"const int " + c_name(name), "int", c_name(name), c_name(name)});
    return members;
}

std::string launcher(const Kernel &kernel, const std::string &fn, const Plan &plan,
                     const std::vector<KernelParam> &members, const LaunchShape &shape) {
    const int threads = shape.threads;
    const int64_t dynamic_bytes = shape.dynamic_bytes, register_floor = shape.register_floor;
    const std::vector<std::string> runtime_extents = kernel.runtime_extent_names();
    std::ostringstream os;
    os << "/** args: device pointers in the Kernel's argument order:";
    for (size_t i = 0; i < kernel.args.size(); i++) {
        const KernelArg &a = kernel.args[i];
        os << (i ? "," : "") << " " << a.name << " (" << (a.output ? "output" : "input") << ", "
           << type_text(a.type) << " [";
        for (size_t d = 0; d < a.extents.size(); d++)
            os << (d ? " x " : "")
               << (a.has_runtime_shape() && a.runtime[d] ? "any" : std::to_string(a.extents[d]));
        os << "])";
    }
    os << ".";
    if (!runtime_extents.empty()) {
        os << "\n * extents: the runtime extents, in argument and dim order:";
        for (const std::string &name : runtime_extents)
            os << " " << name;
        os << ".";
    }
    const std::string extents_param = runtime_extents.empty() ? "" : "const int *extents, ";
    const std::string state = "Launch_" + fn;
    os << "\n * prepare_" << fn
       << " checks the arguments, encodes the tensor maps and sizes the grid, once;\n"
       << " * launch_prepared_" << fn << " only launches (what to time); release_" << fn
       << " frees what prepare made;\n"
       << " * launch_" << fn << " does all three. */\n"
       << "struct " << state << " {\n";
    for (const KernelParam &m : members)
        os << "    " << m.type << " " << m.name << ";\n";
    os << "    int grid;\n"
       << "};\n\n"
       << "extern \"C\" cudaError_t prepare_" << fn << "(void *const *args, " << extents_param
       << "void **prepared) {\n"
       << "    if (prepared == nullptr) return cudaErrorInvalidValue;\n"
       << "    *prepared = nullptr;\n"
       << "    if (args == nullptr) return cudaErrorInvalidValue;\n"
       << "    for (int i = 0; i < " << kernel.args.size() << "; i++) {\n"
       << "        cudaError_t status = hopper::check_argument(args[i]);\n"
       << "        if (status != cudaSuccess) return status;\n"
       << "    }\n";
    CudaExpr launch_expr;
    auto exprs = [&](const std::vector<Expr> &v) {
        std::string s = "{";
        for (size_t i = 0; i < v.size(); i++)
            s += (i ? ", " : "") + std::string("cuuint64_t(") + launch_expr(v[i]) + ")";
        return s + "}";
    };
    if (!runtime_extents.empty()) {
        os << "    if (extents == nullptr) return cudaErrorInvalidValue;\n";
        for (size_t i = 0; i < runtime_extents.size(); i++) {
            os << "    const int " << c_name(runtime_extents[i]) << " = extents[" << i << "];\n"
               << "    if (" << c_name(runtime_extents[i])
               << " < 1) return cudaErrorInvalidValue;\n";
        }
        std::vector<CallCheck> checks = kernel.call_checks;
        checks.insert(checks.end(), plan.launch_checks.begin(), plan.launch_checks.end());
        for (const CallCheck &check : checks)
            os << "    if (!(" << launch_expr(check.holds) << ")) return cudaErrorInvalidValue; // "
               << check.why << "\n";
    }
    for (const TensorMap &m : plan.maps) {
        int arg_index = 0;
        for (size_t i = 0; i < kernel.args.size(); i++) {
            if (kernel.args[i].name == m.arg)
                arg_index = int(i);
        }
        const std::vector<Expr> &strides = m.byte_strides;
        auto encode = [&](const std::string &name, const std::vector<int64_t> &box,
                          const std::string &comment) {
            os << "    CUtensorMap " << name << ";\n"
               << "    { // " << comment << "\n"
               << "        const cuuint64_t extents[" << m.extents.size()
               << "] = " << exprs(m.bounds) << ";\n"
               << "        const cuuint64_t strides[" << std::max<size_t>(strides.size(), 1)
               << "] = " << (strides.empty() ? "{0}" : exprs(strides)) << "; // bytes, dims 1..\n"
               << "        const cuuint32_t box[" << box.size() << "] = " << brace_list(box)
               << ";\n"
               << "        cudaError_t status = hopper::encode_tensor_map(&" << name << ", "
               << tensor_map_type(m.type) << ", " << m.extents.size() << ", args[" << arg_index
               << "], extents, strides, box, "
               << (m.swizzle ? "CU_TENSOR_MAP_SWIZZLE_128B" : "CU_TENSOR_MAP_SWIZZLE_NONE")
               << ");\n"
               << "        if (status != cudaSuccess) return status;\n"
               << "    }\n";
        };
        encode(m.name, m.box,
               m.arg + (m.load ? " -> " : " <- ") + m.buffer +
                   (m.rows > 1 ? (m.row_step > 1 ? ", " + std::to_string(m.rows) + " boxes of " +
                                                       std::to_string(m.row_step) + " rows"
                                                 : ", a row of boxes per tile row (" +
                                                       std::to_string(m.rows) + ")")
                               : "") +
                   (m.view.empty() ? "" : ", " + m.arg + " viewed " + m.view) +
                   (m.chunk ? ", dim 0 viewed as chunks of " + std::to_string(m.chunk) +
                                  " (a box dim is at most 256)"
                            : "") +
                   (m.blocks > 1 ? std::string(m.load ? ", loaded" : ", stored") + " as " +
                                       std::to_string(m.blocks) +
                                       (m.swizzle ? " column blocks" : " boxes side by side")
                                 : ""));
        if (m.last_box) {
            std::vector<int64_t> box = m.box;
            box[0] = m.last_box;
            encode(m.last_name, box,
                   "the last of the " + std::to_string(m.blocks) + " boxes of " + m.name +
                       ": the rest of the tile");
        }
    }
    std::string grid = std::to_string(kernel.grid);
    if (kernel.ctas_per_sm) {
        os << "    static int sms = 0; // the GPU's SM count: the persistent grid is sized from "
              "it\n"
           << "    if (sms == 0) {\n"
           << "        int device = 0;\n"
           << "        cudaError_t status = cudaGetDevice(&device);\n"
           << "        if (status == cudaSuccess) status = cudaDeviceGetAttribute(&sms, "
              "cudaDevAttrMultiProcessorCount, device);\n"
           << "        if (status != cudaSuccess) return status;\n"
           << "    }\n"
           << "    // " << kernel.ctas_per_sm << " CTA(s) per SM (at most the "
           << kernel.target.units()
           << " SMs of the machine description) looping over the tiles, or one per tile where "
              "fewer\n"
           << "    const int grid = hopper::min_of<int>(hopper::min_of<int>(sms, "
           << kernel.target.units() << ") * " << kernel.ctas_per_sm << ", hopper::max_of<int>(1, "
           << launch_expr(kernel.tiles) << "));\n";
        grid = "grid";
    }
    if (register_floor) {
        os << "    static int registers = 0; // ptxas's count, at least the setmaxnreg floor or "
              "the roles would block\n"
           << "    if (registers == 0) {\n"
           << "        cudaFuncAttributes attributes;\n"
           << "        cudaError_t status = cudaFuncGetAttributes(&attributes, " << fn << ");\n"
           << "        if (status != cudaSuccess) return status;\n"
           << "        registers = attributes.numRegs;\n"
           << "    }\n"
           << "    if (registers < " << register_floor
           << ") return cudaErrorLaunchOutOfResources;\n";
    }
    os << "    cudaError_t status = cudaFuncSetAttribute(" << fn
       << ", cudaFuncAttributeMaxDynamicSharedMemorySize, " << dynamic_bytes
       << "); // the carve-out plus 1024 B to align its base\n"
       << "    if (status != cudaSuccess) return status;\n";
    if (kernel.cluster > 1 && kernel.ctas_per_sm) {
        // Whole clusters, as many as the GPU holds at once (its GPCs may not hold SMs / cluster).
        const std::string c = std::to_string(kernel.cluster);
        os << "    static int clusters = 0; // of " << c << " CTAs, resident at once\n"
           << "    if (clusters == 0) {\n"
           << "        cudaLaunchConfig_t config = {};\n"
           << "        config.gridDim = dim3(" << c << ", 1, 1);\n"
           << "        config.blockDim = dim3(" << threads << ", 1, 1);\n"
           << "        config.dynamicSmemBytes = " << dynamic_bytes << ";\n"
           << "        status = cudaOccupancyMaxActiveClusters(&clusters, (void *)" << fn
           << ", &config);\n"
           << "        if (status != cudaSuccess) return status;\n"
           << "        if (clusters < 1) return cudaErrorLaunchOutOfResources;\n"
           << "    }\n"
           << "    const int cluster_grid = hopper::min_of<int>(clusters * " << c << ", (grid + "
           << kernel.cluster - 1 << ") / " << c << " * " << c << ");\n";
        grid = "cluster_grid";
    }
    os << "    " << state << " *launch = new (std::nothrow) " << state << ";\n"
       << "    if (launch == nullptr) return cudaErrorMemoryAllocation;\n";
    for (const KernelParam &m : members)
        os << "    launch->" << m.name << " = " << m.value << ";\n";
    os << "    launch->grid = " << grid << ";\n"
       << "    *prepared = launch;\n"
       << "    return cudaSuccess;\n"
       << "}\n\n"
       << "extern \"C\" cudaError_t launch_prepared_" << fn
       << "(const void *prepared, cudaStream_t stream) {\n"
       << "    if (prepared == nullptr) return cudaErrorInvalidValue;\n"
       << "    const " << state << " &launch = *static_cast<const " << state << " *>(prepared);\n"
       << "    " << fn << "<<<launch.grid, " << threads << ", " << dynamic_bytes << ", stream>>>(";
    for (size_t i = 0; i < members.size(); i++)
        os << (i ? ", " : "") << "launch." << members[i].name;
    os << ");\n"
       << "    return cudaGetLastError();\n"
       << "}\n\n"
       << "extern \"C\" void release_" << fn << "(void *prepared) { delete static_cast<" << state
       << " *>(prepared); }\n\n"
       << launch_in_one(fn, !runtime_extents.empty());
    return os.str();
}

std::string dispatcher(const Kernel &kernel, const std::string &fn, const Plan &plan,
                       const std::vector<StrideVariant> &variants) {
    const std::vector<std::string> runtime_extents = kernel.runtime_extent_names();
    const std::vector<std::string> classes = pitch_classes(plan);
    const std::string state = "Dispatch_" + fn, table = "variants_" + fn;
    CudaExpr launch_expr;
    std::ostringstream os;
    os << "/** " << fn << ": the launchers of the variant for the row pitches whose strides TMA\n"
       << " * cannot take at the call (thread copies take any stride), each pitch a bit:";
    for (size_t c = 0; c < classes.size(); c++)
        os << (c ? "," : "") << " " << (1u << c) << " " << classes[c];
    os << ".\n * Same arguments and extents as theirs. */\n"
       << "struct " << state << " {\n"
       << "    int variant;\n"
       << "    void *prepared;\n"
       << "};\n\n"
       << "static const struct {\n"
       << "    unsigned failing;\n"
       << "    cudaError_t (*prepare)(void *const *, const int *, void **);\n"
       << "    cudaError_t (*launch)(const void *, cudaStream_t);\n"
       << "    void (*release)(void *);\n"
       << "} " << table << "[] = {\n";
    for (const StrideVariant &v : variants) {
        os << "    {" << v.failing << "u, prepare_" << v.fn << ", launch_prepared_" << v.fn
           << ", release_" << v.fn << "},\n";
    }
    os << "};\n\n"
       << "extern \"C\" cudaError_t prepare_" << fn
       << "(void *const *args, const int *extents, void **prepared) {\n"
       << "    if (prepared == nullptr) return cudaErrorInvalidValue;\n"
       << "    *prepared = nullptr;\n"
       << "    if (extents == nullptr) return cudaErrorInvalidValue;\n";
    for (size_t i = 0; i < runtime_extents.size(); i++)
        os << "    const int " << c_name(runtime_extents[i]) << " = extents[" << i << "];\n";
    os << "    unsigned failing = 0;\n";
    for (size_t i = 0; i < plan.launch_checks.size(); i++) {
        const size_t c =
            std::find(classes.begin(), classes.end(), plan.launch_pitches[i]) - classes.begin();
        os << "    if (!(" << launch_expr(plan.launch_checks[i].holds)
           << ")) failing |= " << (1u << c) << "u; // " << plan.launch_checks[i].why << "\n";
    }
    for (const std::string &name : runtime_extents)
        os << "    (void)" << c_name(name) << ";\n";
    os << "    int variant = " << variants.size() - 1 << ";\n"
       << "    for (int v = 0; v < " << variants.size() << "; v++)\n"
       << "        if (" << table << "[v].failing == failing) { variant = v; break; }\n"
       << "    void *inner = nullptr;\n"
       << "    const cudaError_t status = " << table
       << "[variant].prepare(args, extents, &inner);\n"
       << "    if (status != cudaSuccess) return status;\n"
       << "    " << state << " *dispatch = new (std::nothrow) " << state << "{variant, inner};\n"
       << "    if (dispatch == nullptr) {\n"
       << "        " << table << "[variant].release(inner);\n"
       << "        return cudaErrorMemoryAllocation;\n"
       << "    }\n"
       << "    *prepared = dispatch;\n"
       << "    return cudaSuccess;\n"
       << "}\n\n"
       << "extern \"C\" cudaError_t launch_prepared_" << fn
       << "(const void *prepared, cudaStream_t stream) {\n"
       << "    if (prepared == nullptr) return cudaErrorInvalidValue;\n"
       << "    const " << state << " &dispatch = *static_cast<const " << state << " *>(prepared);\n"
       << "    return " << table << "[dispatch.variant].launch(dispatch.prepared, stream);\n"
       << "}\n\n"
       << "extern \"C\" void release_" << fn << "(void *prepared) {\n"
       << "    " << state << " *dispatch = static_cast<" << state << " *>(prepared);\n"
       << "    if (dispatch == nullptr) return;\n"
       << "    " << table << "[dispatch->variant].release(dispatch->prepared);\n"
       << "    delete dispatch;\n"
       << "}\n\n"
       << launch_in_one(fn, true);
    return os.str();
}

std::string pipeline_launcher(const Kernel &pipeline, const std::string &fn,
                              const std::vector<std::string> &fns) {
    const std::string state = "Pipeline_" + fn;
    const size_t intermediates = pipeline.intermediates.size(), kernels = pipeline.stages.size();
    std::ostringstream os;
    os << "/** " << fn << ": a pipeline of " << kernels << " kernels, launched in turn:";
    for (const std::string &f : fns)
        os << " " << f;
    os << ".\n * args: device pointers in the pipeline's argument order:";
    for (const KernelArg &a : pipeline.args)
        os << " " << a.name;
    os << ". The intermediates (";
    for (size_t w = 0; w < intermediates; w++)
        os << (w ? ", " : "") << pipeline.intermediates[w].name;
    os << ") are allocated by prepare_" << fn << ". */\n"
       << "struct " << state << " {\n"
       << "    void *intermediate[" << intermediates << "];\n"
       << "    void *prepared[" << kernels << "];\n"
       << "};\n\n";
    const bool runtime = pipeline.has_runtime_shapes();
    const std::string extents_param = runtime ? "const int *extents, " : "";
    for (size_t k = 0; k < kernels; k++) {
        const std::string &f = fns[k];
        os << "extern \"C\" cudaError_t prepare_" << f << "(void *const *args, "
           << (pipeline.stages[k].has_runtime_shapes() ? "const int *extents, " : "")
           << "void **prepared);\n"
           << "extern \"C\" cudaError_t launch_prepared_" << f
           << "(const void *prepared, cudaStream_t stream);\n"
           << "extern \"C\" void release_" << f << "(void *prepared);\n";
    }
    os << "\nextern \"C\" void release_" << fn << "(void *prepared) {\n"
       << "    " << state << " *p = static_cast<" << state << " *>(prepared);\n"
       << "    if (p == nullptr) return;\n";
    for (size_t k = 0; k < kernels; k++)
        os << "    release_" << fns[k] << "(p->prepared[" << k << "]);\n";
    os << "    for (void *w : p->intermediate) if (w) cudaFreeAsync(w, 0);\n"
       << "    delete p;\n"
       << "}\n\n"
       << "extern \"C\" cudaError_t prepare_" << fn << "(void *const *args, " << extents_param
       << "void **prepared) {\n"
       << "    if (prepared == nullptr) return cudaErrorInvalidValue;\n"
       << "    *prepared = nullptr;\n"
       << "    if (args == nullptr" << (runtime ? " || extents == nullptr" : "")
       << ") return cudaErrorInvalidValue;\n";
    // The caller's runtime extents, then the intermediates' in their terms.
    const std::vector<std::string> names = pipeline.runtime_extent_names();
    for (size_t i = 0; i < names.size(); i++)
        os << "    const int " << c_name(names[i]) << " = extents[" << i << "];\n";
    CudaExpr launch_expr;
    for (const auto &[name, e] : pipeline.intermediate_extents)
        os << "    const int " << c_name(name) << " = " << launch_expr(e) << ";\n";
    os << "    " << state << " *p = new (std::nothrow) " << state << "{};\n"
       << "    if (p == nullptr) return cudaErrorMemoryAllocation;\n"
       << "    cudaError_t status = cudaSuccess;\n";
    for (size_t w = 0; w < intermediates; w++) {
        const KernelArg &a = pipeline.intermediates[w];
        std::string bytes = std::to_string(a.type.bytes());
        for (size_t d = 0; d < a.extents.size(); d++)
            bytes += " * size_t(" +
                     (a.runtime[d] ? c_name(a.extent_name(int(d))) : std::to_string(a.extents[d])) +
                     ")";
        os << "    if (status == cudaSuccess) status = cudaMallocAsync(&p->intermediate[" << w
           << "], " << bytes << ", 0); // " << a.name
           << " (stream-ordered: a call's, not cudaMalloc's)\n";
    }
    for (size_t k = 0; k < kernels; k++) {
        os << "    if (status == cudaSuccess) {\n        void *kernel_args[] = {";
        const Kernel &stage = pipeline.stages[k];
        for (size_t i = 0; i < stage.args.size(); i++) {
            const std::string &name = stage.args[i].name;
            std::string at;
            for (size_t j = 0; j < pipeline.args.size(); j++)
                if (pipeline.args[j].name == name)
                    at = "args[" + std::to_string(j) + "]";
            for (size_t w = 0; w < intermediates; w++)
                if (pipeline.intermediates[w].name == name)
                    at = "p->intermediate[" + std::to_string(w) + "]";
            internal_assert(!at.empty()) << "pipeline argument " << name << " not found\n";
            os << (i ? ", " : "") << at;
        }
        os << "};\n";
        std::string extents;
        if (stage.has_runtime_shapes()) {
            os << "        const int kernel_extents[] = {";
            const std::vector<std::string> own = stage.runtime_extent_names();
            for (size_t e = 0; e < own.size(); e++)
                os << (e ? ", " : "") << c_name(own[e]);
            os << "};\n";
            extents = "kernel_extents, ";
        }
        os << "        status = prepare_" << fns[k] << "(kernel_args, " << extents
           << "&p->prepared[" << k << "]);\n    }\n";
    }
    os << "    if (status != cudaSuccess) {\n"
       << "        release_" << fn << "(p);\n"
       << "        return status;\n"
       << "    }\n"
       << "    *prepared = p;\n"
       << "    return cudaSuccess;\n"
       << "}\n\n"
       << "extern \"C\" cudaError_t launch_prepared_" << fn
       << "(const void *prepared, cudaStream_t stream) {\n"
       << "    if (prepared == nullptr) return cudaErrorInvalidValue;\n"
       << "    const " << state << " *p = static_cast<const " << state << " *>(prepared);\n"
       << "    cudaError_t status = cudaSuccess;\n";
    for (size_t k = 0; k < kernels; k++)
        os << "    if (status == cudaSuccess) status = launch_prepared_" << fns[k]
           << "(p->prepared[" << k << "], stream);\n";
    os << "    return status;\n"
       << "}\n\n"
       << launch_in_one(fn, runtime);
    return os.str();
}

std::string emit_library(const Kernel &kernel, const std::string &function) {
    const std::string fn = function.empty() ? c_name(kernel.name) : function;
    std::ostringstream includes, run;
    includes << "#include <cuda_runtime.h>\n\n"
             << "extern \"C\" cudaError_t launch_" << fn << "(void *const *args, "
             << (kernel.has_runtime_shapes() ? "const int *extents, " : "")
             << "cudaStream_t stream);\n";
    run << "        void *args[] = {";
    for (size_t i = 0; i < kernel.args.size(); i++)
        run << (i ? ", " : "") << "reinterpret_cast<void *>(buffers[" << i << "]->device)";
    run << "};\n";
    if (kernel.has_runtime_shapes()) { // each runtime extent of each buffer, in order
        run << "        const int extents[] = {";
        const char *sep = "";
        for (size_t i = 0; i < kernel.args.size(); i++) {
            for (size_t d = 0; d < kernel.args[i].runtime.size(); d++) {
                if (kernel.args[i].runtime[d]) {
                    run << sep << "buffers[" << i << "]->dim[" << d << "].extent";
                    sep = ", ";
                }
            }
        }
        run << "};\n";
    }
    run << "        cudaError_t status = launch_" << fn << "(args, "
        << (kernel.has_runtime_shapes() ? "extents, " : "") << "0);\n"
        << "        if (status == cudaSuccess) status = cudaDeviceSynchronize();\n"
        << "        if (status != cudaSuccess) return fail(halide_error_code_generic_error, "
           "cudaGetErrorString(status));\n"
        << "        last_cycles = 0; // no model on the GPU\n";
    return library::source(kernel, fn, includes.str(), "", run.str(), library::Memory::Device);
}

} // namespace tandem::hopper_backend
