#include "GpuTiming.h"

#include "Run.h"
#include "common/Backend.h"
#include "tandem/Error.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/file.h>
#include <unistd.h>

#ifndef TANDEM_SOURCE_DIR
#error "TANDEM_SOURCE_DIR: the source tree (the GPU harness and the Hopper runtime headers)"
#endif

namespace tandem::apps {

namespace fs = std::filesystem;

namespace {

/** Runs `command` through the shell, without the tuner's limit on the address space (nvcc and
 * the CUDA runtime map far more than they use); its exit status, and its output in *out. */
int shell(const std::string &command, std::string *out) {
    FILE *pipe = popen(("ulimit -S -v unlimited 2>/dev/null; " + command + " 2>&1").c_str(), "r");
    if (!pipe)
        return -1;
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0)
        out->append(buffer, n);
    const int status = pclose(pipe);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string quoted(const std::string &s) {
    return "'" + s + "'";
}

std::string read_file(const fs::path &p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

/** The last lines of a long text (a failure message). */
std::string tail(const std::string &text, size_t chars = 600) {
    return text.size() <= chars ? text : "..." + text.substr(text.size() - chars);
}

} // namespace

std::string nvcc_path() {
    if (const char *env = std::getenv("TANDEM_NVCC"))
        return env;
    return fs::exists("/usr/local/cuda/bin/nvcc") ? "/usr/local/cuda/bin/nvcc" : "nvcc";
}

bool gpu_harness_times(const App &app) {
    return app.name == "gemm" || app.name == "attention_scores" || app.name == "elementwise" ||
           app.name == "rmsnorm";
}

void require_gpu() {
    std::string out;
    if (shell(quoted(nvcc_path()) + " --version", &out) != 0) {
        throw Error("--device gpu: nvcc is not here (TANDEM_NVCC, /usr/local/cuda/bin or PATH): " +
                    tail(out, 200));
    }
    out.clear();
    if (shell("nvidia-smi -L", &out) != 0 || out.find("GPU") == std::string::npos) {
        throw Error("--device gpu: this machine has no GPU (nvidia-smi -L: " + tail(out, 200) +
                    "); run the GPU workers where there is one (tune-worker --device gpu), or time "
                    "on the model");
    }
}

GpuKernelSource gpu_kernel_source(const App &app, const Params &params, const std::string &schedule,
                                  const std::string &name) {
    const Target target = Target::parse("hopper");
    const Kernel kernel = compile_app(app, params, schedule, target);
    if (kernel.has_runtime_shapes())
        throw Error("tune --device gpu: the harness times static shapes only");
    GpuKernelSource source;
    for (const Source &s : backend_of(target).sources) {
        if (s.what == "cuda")
            source.cuda = s.emit(kernel, name, EmitOptions{});
    }
    if (source.cuda.empty())
        throw Error("tune --device gpu: the hopper backend emits no CUDA");
    // The harness's extents: gemm M N K; attention_scores Lq Lk D; elementwise W H; rmsnorm D R.
    std::string a, b, c = "0";
    if (app.name == "gemm")
        a = params.get("M"), b = params.get("N"), c = params.get("K");
    else if (app.name == "attention_scores")
        a = params.get("Lq"), b = params.get("Lk"), c = params.get("D");
    else if (app.name == "elementwise")
        a = params.get("W"), b = params.get("H");
    else
        a = params.get("D"), b = params.get("R");
    // The output's type: gemm's `out` (bf16 by default), attention's f32 scores; the streaming
    // apps' f32.
    const std::string out =
        app.name == "gemm" ? (params.has("out") ? params.get("out") : "bf16") : "f32";
    source.registry = "TANDEM_KERNEL(" + name + ", \"" + app.name + "\", \"" + schedule + "\", " +
                      a + ", " + b + ", " + c + ", \"" + out + "\", \"" +
                      (params.has("in") ? params.get("in") : "bf16") + "\")\n";
    return source;
}

void write_gpu_harness_sources(const App &app, const Params &params, const std::string &schedule,
                               const std::string &dir, const std::string &name) {
    const GpuKernelSource source = gpu_kernel_source(app, params, schedule, name);
    std::ofstream(fs::path(dir) / (name + ".cu")) << source.cuda;
    std::ofstream(fs::path(dir) / "registry.inc") << source.registry;
}

std::string gpu_harness_build_command(const std::string &dir, const std::string &name) {
    const std::string source = TANDEM_SOURCE_DIR;
    return quoted(nvcc_path()) + " -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I" +
           quoted(source + "/backends/hopper/runtime") + " -I" + quoted(dir) + " " +
           quoted(source + "/benchmarks/gpu/harness.cu") + " " + quoted(dir + "/" + name + ".cu") +
           " -lcublas -o " + quoted(dir + "/harness");
}

GpuTiming time_on_gpu(const App &app, const Params &params, const std::string &schedule,
                      double timeout_seconds) {
    GpuTiming t;
    char pattern[] = "/tmp/tandem-gpu-XXXXXX";
    if (!mkdtemp(pattern))
        throw Error("tune --device gpu: cannot create a directory under /tmp");
    const std::string dir = pattern, name = "candidate";
    struct Remove {
        std::string dir;
        ~Remove() {
            std::error_code ec;
            fs::remove_all(dir, ec);
        }
    } remove{dir};
    write_gpu_harness_sources(app, params, schedule, dir, name);
    std::string out;
    if (shell(gpu_harness_build_command(dir, name), &out) != 0) {
        t.failure = "nvcc failed: " + tail(out);
        return t;
    }
    out.clear();
    // One timing at a time on this machine's GPU (builds run in parallel): other tuners' and
    // workers' kernels would share its SMs and skew both times.
    const int lock = open("/tmp/tandem-gpu-timing.lock", O_RDWR | O_CREAT, 0666);
    if (lock >= 0)
        flock(lock, LOCK_EX);
    struct Unlock {
        int fd;
        ~Unlock() {
            if (fd >= 0)
                close(fd); // releases the lock
        }
    } unlock{lock};
    const int limit = std::max(1, int(timeout_seconds));
    const int status =
        shell("timeout -k 5 " + std::to_string(limit) + " " + quoted(dir + "/harness") + " " +
                  name + " bench 2>" + quoted(dir + "/stderr"),
              &out);
    const std::string row = out.substr(0, out.find('\n'));
    if (status != 0 || row.empty() || row[0] != '{') {
        t.failure = (status == 124 ? "timed out after " + std::to_string(limit) + " s (a hang?)"
                                   : "the harness exited with status " + std::to_string(status)) +
                    ": " + tail(read_file(fs::path(dir) / "stderr") + out);
        return t;
    }
    try {
        const nlohmann::json j = nlohmann::json::parse(row);
        t.correct = j.at("correct");
        t.max_rel_err = j.at("max_rel_err").is_number() ? j.at("max_rel_err").get<double>()
                                                        : HUGE_VAL; // null: NaN
        t.device = j.at("device");
        t.time_ms = j.at("tandem_ms");
        t.reference_ms =
            j.contains("cublas_ms") ? j.at("cublas_ms").get<double>() : j.value("copy_ms", 0.0);
    } catch (const nlohmann::json::exception &e) {
        t.failure =
            std::string("the harness's row is not what it writes: ") + e.what() + ": " + tail(row);
    }
    return t;
}

} // namespace tandem::apps
