// The Hopper emitter's CUDA through nvcc/ptxas for sm_90a (no GPU needed): every emitted kernel
// assembles, spills nothing, and uses the instructions its schedule promises (TMA, mbarrier
// parity waits, wgmma, setmaxnreg). Skipped, with a message, where nvcc is not installed.
// Plus the emitter's user errors (no nvcc needed).
#include "App.h"
#include "Run.h"
#include "hopper/Emitter.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#ifndef TANDEM_HOPPER_RUNTIME_DIR
#error "TANDEM_HOPPER_RUNTIME_DIR must name backends/hopper/runtime"
#endif

namespace {

using namespace tandem;
namespace fs = std::filesystem;

/** The nvcc to use: $TANDEM_NVCC if set ("none" skips), /usr/local/cuda/bin/nvcc, the one on
 * PATH, else empty. */
std::string find_nvcc() {
    if (const char *given = std::getenv("TANDEM_NVCC"))
        return std::string(given) == "none" ? "" : given;
    if (fs::exists("/usr/local/cuda/bin/nvcc"))
        return "/usr/local/cuda/bin/nvcc";
    if (std::system("command -v nvcc > /dev/null 2>&1") == 0)
        return "nvcc";
    return "";
}

struct Command {
    int status = -1;
    std::string output;
};

Command run(const std::string &command) {
    Command r;
    FILE *pipe = popen((command + " 2>&1").c_str(), "r");
    if (!pipe)
        return r;
    std::array<char, 4096> buffer;
    size_t n;
    while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
        r.output.append(buffer.data(), n);
    r.status = pclose(pipe);
    return r;
}

std::string read(const fs::path &p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

struct Case {
    std::string name, app, schedule; // empty schedule: the app's default on hopper
    std::map<std::string, std::string> params;
    bool mma = false, warp_specialized = false;
};

std::ostream &operator<<(std::ostream &os, const Case &c) {
    return os << c.name;
}

Kernel compile_case(const Case &c) {
    const apps::App &app = apps::find_app(c.app);
    apps::Params params = apps::with_defaults(app, apps::Params(c.params), "hopper");
    std::string schedule =
        c.schedule.empty() ? apps::schedules_for(app, "hopper").front() : c.schedule;
    return apps::compile_app(app, params, schedule, Target::parse("hopper"));
}

class Ptxas : public ::testing::TestWithParam<Case> {};

TEST_P(Ptxas, AssemblesWithoutSpills) {
    const Case &c = GetParam();
    const std::string nvcc = find_nvcc();
    if (nvcc.empty())
        GTEST_SKIP() << "nvcc not found (/usr/local/cuda/bin/nvcc or PATH): the emitted CUDA is "
                        "not assembled";

    Kernel kernel = compile_case(c);
    std::string source = hopper_backend::emit_cuda(kernel, c.name);
    fs::path dir =
        fs::temp_directory_path() / ("tandem_hopper_ptxas_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    fs::path cu = dir / (c.name + ".cu"), ptx = dir / (c.name + ".ptx"),
             cubin = dir / (c.name + ".cubin");
    std::ofstream(cu) << source;

    const std::string flags =
        " -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I" TANDEM_HOPPER_RUNTIME_DIR " ";
    Command assemble =
        run(nvcc + flags + "-Xptxas -v -cubin -o " + cubin.string() + " " + cu.string());
    ASSERT_EQ(assemble.status, 0) << "nvcc/ptxas failed on " << cu << ":\n" << assemble.output;
    Command to_ptx = run(nvcc + flags + "--ptx -o " + ptx.string() + " " + cu.string());
    ASSERT_EQ(to_ptx.status, 0) << to_ptx.output;
    const std::string text = read(ptx);

    // ptxas -v: "N bytes spill stores, M bytes spill loads" and "Used R registers".
    std::smatch m;
    ASSERT_TRUE(std::regex_search(
        assemble.output, m, std::regex("(\\d+) bytes spill stores, (\\d+) bytes spill loads")))
        << assemble.output;
    EXPECT_EQ(m[1], "0") << "spill stores in " << c.name << ":\n" << assemble.output;
    EXPECT_EQ(m[2], "0") << "spill loads in " << c.name << ":\n" << assemble.output;
    if (std::regex_search(assemble.output, m, std::regex("Used (\\d+) registers"))) {
        RecordProperty("registers", m[1].str());
        std::cout << "[ ptxas    ] " << c.name << ": " << m[1] << " registers, 0 spills\n";
    }
    EXPECT_EQ(assemble.output.find("C7508"), std::string::npos) << "ptxas ignored setmaxnreg:\n"
                                                                << assemble.output;
    EXPECT_EQ(assemble.output.find("is injected"), std::string::npos)
        << "ptxas serialised wgmma around accumulator registers:\n"
        << assemble.output;

    EXPECT_NE(text.find("cp.async.bulk.tensor"), std::string::npos) << "no TMA in " << c.name;
    EXPECT_NE(text.find("mbarrier.try_wait.parity"), std::string::npos)
        << "no mbarrier wait in " << c.name;
    if (c.mma) {
        EXPECT_NE(text.find("wgmma.mma_async"), std::string::npos) << "no wgmma in " << c.name;
    }
    if (c.warp_specialized) {
        EXPECT_NE(text.find("setmaxnreg"), std::string::npos) << "no setmaxnreg in " << c.name;
    }
    fs::remove(cu);
    fs::remove(ptx);
    fs::remove(cubin);
}

std::vector<Case> cases() {
    std::vector<Case> r;
    for (const char *schedule : {"pipelined", "ws", "ws_pingpong"}) {
        bool ws = std::string(schedule) != "pipelined";
        r.push_back({std::string("gemm_1000_") + schedule,
                     "gemm",
                     schedule,
                     {{"M", "1000"}, {"N", "1000"}, {"K", "1000"}},
                     true,
                     ws});
        r.push_back({std::string("gemm_256x256x128_") + schedule,
                     "gemm",
                     schedule,
                     {{"M", "256"}, {"N", "256"}, {"K", "128"}},
                     true,
                     ws});
    }
    r.push_back({"elementwise", "elementwise", "", {}, false, false});
    r.push_back({"rmsnorm", "rmsnorm", "", {}, false, false});
    return r;
}

INSTANTIATE_TEST_SUITE_P(Hopper, Ptxas, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case> &info) {
                             return info.param.name;
                         });

// ---- user errors: each names the buffer or tensor and the TMA rule ----

std::string emit_error(const Case &c) {
    try {
        hopper_backend::emit_cuda(compile_case(c));
    } catch (const Error &e) {
        return e.what();
    }
    return "";
}

TEST(HopperEmitterErrors, GlobalStrideNotMultipleOf16Bytes) {
    // A row of 1001 bf16 is 2002 bytes: TMA needs global strides that are multiples of 16 bytes.
    std::string message =
        emit_error({"odd_k", "gemm", "ws", {{"M", "256"}, {"N", "256"}, {"K", "1001"}}});
    EXPECT_NE(message.find("A has a global stride of 2002 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("multiples of 16 bytes"), std::string::npos) << message;
}

TEST(HopperEmitterErrors, MmaTileKMustBeAMultipleOf64) {
    // With the 128B swizzle an MMA operand's inner dim is made of 64-element column blocks.
    std::string message = emit_error(
        {"tk32", "gemm", "ws", {{"M", "256"}, {"N", "256"}, {"K", "256"}, {"TK", "32"}}});
    EXPECT_NE(message.find("MMA operand A"), std::string::npos) << message;
    EXPECT_NE(message.find("multiple of 64 bf16"), std::string::npos) << message;
}

TEST(HopperEmitterErrors, RejectsOtherTargets) {
    const apps::App &app = apps::find_app("gemm");
    Kernel zpu = apps::compile_app(app, apps::with_defaults(app, apps::Params(), "zpu"),
                                   "pipelined", Target::parse("zpu"));
    EXPECT_THROW(hopper_backend::emit_cuda(zpu), Error);
}

} // namespace
