// The Hopper emitter's CUDA through nvcc/ptxas for sm_90a (no GPU needed): every emitted kernel
// assembles, spills nothing, and uses the instructions its schedule promises (TMA, mbarrier
// parity waits, wgmma, setmaxnreg), at the apps' sizes and at small and ragged ones whose tiles
// the emitter pads. Skipped, with a message, where nvcc is not installed.
// Plus the emitter's user errors (no nvcc needed).
#include "App.h"
#include "Run.h"
#include "hopper/Emitter.h"
#include "hopper/Executor.h"
#include "hopper/Plan.h"
#include "hopper/TailProof.h"

#include <gtest/gtest.h>

#include <algorithm>
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

/** The registers per thread a kernel's setmaxnreg roles need the launch to allocate (the emitted
 * "setmaxnreg floor" comment; 0 without setmaxnreg). */
int register_floor(const std::string &source) {
    std::smatch m;
    return std::regex_search(source, m, std::regex("setmaxnreg floor: (\\d+) registers"))
               ? std::stoi(m[1])
               : 0;
}

/** ptxas -v's register count of each entry function (by its mangled name). */
std::map<std::string, int> used_registers(const std::string &ptxas_output) {
    std::map<std::string, int> used;
    std::string entry;
    std::smatch m;
    std::istringstream lines(ptxas_output);
    for (std::string line; std::getline(lines, line);) {
        if (std::regex_search(line, m, std::regex("Compiling entry function '([^']+)'")))
            entry = m[1];
        else if (std::regex_search(line, m, std::regex("Used (\\d+) registers")) && !entry.empty())
            used[entry] = std::stoi(m[1]);
    }
    return used;
}

/** A kernel whose ptxas count is below its setmaxnreg floor would hang on setmaxnreg.inc: the
 * build must refuse it (issue 15). Each of a kernel's functions `names` (a runtime-shape kernel's
 * variants: name_tma, name_threads, name_threads_<tensors>) meets it. */
void expect_floor_met(const std::string &ptxas_output, const std::vector<std::string> &names,
                      int floor) {
    if (floor == 0)
        return;
    int found = 0;
    for (const std::string &fn : names) {
        for (const auto &[entry, used] : used_registers(ptxas_output)) {
            if (entry.find(std::to_string(fn.size()) + fn) == std::string::npos)
                continue;
            found++;
            EXPECT_GE(used, floor) << fn << ": ptxas allocates " << used
                                   << " registers per thread, setmaxnreg needs " << floor;
        }
    }
    if (found == 0)
        ADD_FAILURE() << "no ptxas register count for " << names.front();
}

struct Case {
    std::string name, app, schedule; // empty schedule: the app's default on hopper
    std::map<std::string, std::string> params;
    bool mma = false, warp_specialized = false;
    bool multicast = false; // a cluster: multicast TMA loads, remote arrivals, cluster barrier
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

    // ptxas -v: "N bytes spill stores, M bytes spill loads" (per function: every variant) and
    // "Used R registers".
    std::smatch m;
    const std::regex spills("(\\d+) bytes spill stores, (\\d+) bytes spill loads");
    ASSERT_TRUE(std::regex_search(assemble.output, m, spills)) << assemble.output;
    for (auto it = std::sregex_iterator(assemble.output.begin(), assemble.output.end(), spills);
         it != std::sregex_iterator(); ++it) {
        EXPECT_EQ((*it)[1], "0") << "spill stores in " << c.name << ":\n" << assemble.output;
        EXPECT_EQ((*it)[2], "0") << "spill loads in " << c.name << ":\n" << assemble.output;
    }
    if (std::regex_search(assemble.output, m, std::regex("Used (\\d+) registers"))) {
        RecordProperty("registers", m[1].str());
        std::cout << "[ ptxas    ] " << c.name << ": " << m[1] << " registers, 0 spills\n";
    }
    if (!kernel.has_runtime_shapes()) {
        // The CTAs the model puts on an SM at once (resident_ctas) fit what ptxas gave the
        // kernel: its registers (allocated in eights per thread), and the static shared memory
        // it reports within what launch_shared_bytes counts beside the carve-out.
        const hopper_backend::Plan plan = hopper_backend::plan_kernel(kernel);
        const sim::hopper::HopperParams params;
        const int resident = hopper_backend::resident_ctas(kernel, plan, params);
        const int64_t threads = hopper_backend::cta_threads(kernel);
        const int64_t counted_static = hopper_backend::launch_shared_bytes(kernel, plan) -
                                       plan.shared_bytes - hopper_backend::swizzle_atom_bytes;
        const std::regex used("Used (\\d+) registers, used \\d+ barriers(, (\\d+) bytes smem)?");
        ASSERT_TRUE(std::regex_search(assemble.output, m, used)) << assemble.output;
        const int64_t registers = (std::stoll(m[1].str()) + 7) / 8 * 8;
        EXPECT_LE(resident * threads * registers, params.registers_per_sm)
            << c.name << ": the model holds " << resident << " CTAs per SM, ptxas gives " << m[1]
            << " registers to each of " << threads << " threads";
        if (m[3].matched) {
            EXPECT_LE(std::stoll(m[3].str()), counted_static) << c.name;
        }
    }
    expect_floor_met(assemble.output, {c.name, c.name + "_tma", c.name + "_threads"},
                     register_floor(source));
    if (c.warp_specialized) {
        EXPECT_GT(register_floor(source), 0) << "no setmaxnreg floor in " << c.name;
    }
    EXPECT_EQ(assemble.output.find("C7508"), std::string::npos) << "ptxas ignored setmaxnreg:\n"
                                                                << assemble.output;
    EXPECT_EQ(assemble.output.find("is injected"), std::string::npos)
        << "ptxas serialised wgmma around accumulator registers:\n"
        << assemble.output;
    EXPECT_EQ(assemble.output.find("are serialized"), std::string::npos)
        << "ptxas serialised the wgmma pipeline:\n"
        << assemble.output;

    EXPECT_NE(text.find("cp.async.bulk.tensor"), std::string::npos) << "no TMA in " << c.name;
    EXPECT_NE(text.find("mbarrier.try_wait.parity"), std::string::npos)
        << "no mbarrier wait in " << c.name;
    if (kernel.has_runtime_shapes()) {
        // The TMA coordinates divide by runtime extents through divisors prepared at the kernel's
        // start, never by C's / or % (some twenty instructions each, every k-step).
        EXPECT_NE(source.find("hopper::Divisor"), std::string::npos) << c.name;
        EXPECT_FALSE(std::regex_search(
            source, m,
            std::regex("(tma_load|tma_store|check_tail)\\([^;]*[/%] [A-Za-z_0-9]*extent")))
            << "a TMA coordinate divided by a runtime extent in " << c.name << ": " << m[0];
    }
    // The producer's ring slot and parity are a counter's unsigned modulo and quotient (a signed
    // floor division is some fifteen instructions on the one thread that issues the loads), and
    // an offset inside a tensor is unsigned (session 35: the runtime-shape producer's k-step).
    if (source.find("_ring = 0;") != std::string::npos) {
        EXPECT_TRUE(std::regex_search(
            source, m, std::regex("_slot = int\\(uint32_t\\([A-Za-z_0-9]*_ring\\) % [0-9]+u\\);")))
            << "a ring slot in signed arithmetic in " << c.name;
        EXPECT_FALSE(
            std::regex_search(source, m, std::regex("floor_(div|mod)\\([A-Za-z_0-9]*_ring")))
            << c.name << ": " << m[0];
    }
    EXPECT_NE(source.find("const uint32_t offset = "), std::string::npos) << c.name;
    if (c.mma) {
        EXPECT_NE(text.find("wgmma.mma_async"), std::string::npos) << "no wgmma in " << c.name;
        // tnspB: gemm's B is N-major (1), attention's K is K-major (0).
        const std::string tnsp_b =
            c.app == "attention_scores" ? "accumulate, 1, 1, 0, 0;" : "accumulate, 1, 1, 0, 1;";
        EXPECT_NE(text.find(tnsp_b), std::string::npos)
            << "wgmma without " << tnsp_b << " in " << c.name;
        // The operands' type: wgmma .f32.f16.f16 and f16 tensor maps for in=f16, else bf16.
        const bool f16 = c.params.count("in") && c.params.at("in") == "f16";
        EXPECT_NE(text.find(f16 ? ".f32.f16.f16" : ".f32.bf16.bf16"), std::string::npos)
            << "wgmma on the wrong operand type in " << c.name;
        if (f16) {
            EXPECT_NE(source.find("CU_TENSOR_MAP_DATA_TYPE_FLOAT16"), std::string::npos)
                << "no f16 tensor map in " << c.name;
        }
    }
    if (c.warp_specialized) {
        EXPECT_NE(text.find("setmaxnreg"), std::string::npos) << "no setmaxnreg in " << c.name;
    }
    if (c.multicast) {
        EXPECT_NE(text.find(".multicast::cluster"), std::string::npos)
            << "no multicast TMA load in " << c.name;
        EXPECT_NE(text.find("mapa.shared::cluster"), std::string::npos)
            << "no remote mbarrier in " << c.name;
        EXPECT_NE(text.find("mbarrier.arrive.shared::cluster"), std::string::npos)
            << "no remote arrival in " << c.name;
        EXPECT_EQ(text.find("mbarrier.arrive.release.cluster"), std::string::npos)
            << "a remote arrival at cluster scope (a MEMBAR.ALL.GPU each) in " << c.name;
        EXPECT_NE(text.find("barrier.cluster.wait"), std::string::npos)
            << "no cluster barrier in " << c.name;
        EXPECT_NE(text.find(".reqntid") == std::string::npos ? text.find(".explicitcluster")
                                                             : text.find(".reqnctapercluster"),
                  std::string::npos)
            << "no cluster shape in " << c.name;
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
    for (const char *size : {"1000", "256"}) {
        r.push_back({std::string("gemm_") + size + "_ws_cooperative_tn256",
                     "gemm",
                     "ws_cooperative",
                     {{"M", size}, {"N", size}, {"K", "128"}, {"TN", "256"}},
                     true,
                     true});
    }
    r.push_back({"gemm_200x520x72_ws_cooperative_tn256_f32",
                 "gemm",
                 "ws_cooperative",
                 {{"M", "200"}, {"N", "520"}, {"K", "72"}, {"TN", "256"}, {"out", "f32"}},
                 true,
                 true});
    // f16 operands: wgmma .f16 from TMA tiles; with runtime shapes, the thread-copy variant too.
    r.push_back({"gemm_1000_ws_pingpong_f16",
                 "gemm",
                 "ws_pingpong",
                 {{"M", "1000"}, {"N", "1000"}, {"K", "1000"}, {"in", "f16"}},
                 true,
                 true});
    r.push_back({"gemm_runtime_ws_cooperative_tn256_f16",
                 "gemm",
                 "ws_cooperative",
                 {{"shapes", "runtime"}, {"TN", "256"}, {"in", "f16"}},
                 true,
                 true});
    // Runtime shapes: a TMA variant and a thread-copy variant in one file.
    r.push_back({"gemm_runtime_ws_cooperative_tn256",
                 "gemm",
                 "ws_cooperative",
                 {{"shapes", "runtime"}, {"TN", "256"}},
                 true,
                 true});
    r.push_back({"attention_scores_runtime",
                 "attention_scores",
                 "ws_pingpong",
                 {{"shapes", "runtime"}},
                 true,
                 true});
    // K-major B (attention's K rows): wgmma with tnspB 0.
    r.push_back({"attention_scores_256x200x128",
                 "attention_scores",
                 "ws_pingpong",
                 {{"Lq", "256"}, {"Lk", "200"}, {"D", "128"}},
                 true,
                 true});
    // Operands of more than 256 rows (a box dim's limit): equal boxes of rows, stacked (A with
    // 512 rows of M; an N-major B with 512 rows of K).
    r.push_back({"gemm_1000x256x1024_ws_cooperative_tm512",
                 "gemm",
                 "ws_cooperative",
                 {{"M", "1000"}, {"N", "256"}, {"K", "1024"}, {"TM", "512"}, {"TN", "64"}},
                 true,
                 true});
    r.push_back({"gemm_1000x256x1024_ws_cooperative_tk512",
                 "gemm",
                 "ws_cooperative",
                 {{"M", "1000"}, {"N", "256"}, {"K", "1024"}, {"TK", "512"}, {"TN", "64"}},
                 true,
                 true});
    // 2x1 and 1x2 clusters: B or A multicast; a cluster tail (an odd tile count per row).
    r.push_back({"gemm_1024_ws_cooperative_tn256_cluster_m2",
                 "gemm",
                 "ws_cooperative",
                 {{"M", "1024"}, {"N", "1024"}, {"K", "256"}, {"TN", "256"}, {"cluster_m", "2"}},
                 true,
                 true,
                 true});
    r.push_back({"gemm_512_ws_pingpong_cluster_n2",
                 "gemm",
                 "ws_pingpong",
                 {{"M", "512"}, {"N", "512"}, {"K", "128"}, {"cluster_n", "2"}},
                 true,
                 true,
                 true});
    r.push_back({"gemm_384x768x128_ws_cluster_n2",
                 "gemm",
                 "ws",
                 {{"M", "384"}, {"N", "768"}, {"K", "128"}, {"cluster_n", "2"}},
                 true,
                 true,
                 true});
    r.push_back({"gemm_runtime_ws_cooperative_tn256_cluster_m2",
                 "gemm",
                 "ws_cooperative",
                 {{"shapes", "runtime"}, {"TN", "256"}, {"cluster_m", "2"}},
                 true,
                 true,
                 true});
    // Nine tile columns: pairs of columns, the last one short (guarded).
    r.push_back({"gemm_1000x1096x520_ws_cooperative_cluster_n2",
                 "gemm",
                 "ws_cooperative",
                 {{"M", "1000"}, {"N", "1096"}, {"K", "520"}, {"cluster_n", "2"}},
                 true,
                 true,
                 true});
    // Three tile rows: the last pair's second CTA has no tile of its own (a guarded short group).
    r.push_back({"gemm_384x512x128_ws_pingpong_cluster_m2",
                 "gemm",
                 "ws_pingpong",
                 {{"M", "384"}, {"N", "512"}, {"K", "128"}, {"cluster_m", "2"}},
                 true,
                 true,
                 true});
    r.push_back({"elementwise", "elementwise", "", {}, false, false});
    r.push_back({"rmsnorm", "rmsnorm", "", {}, false, false});
    return r;
}

INSTANTIATE_TEST_SUITE_P(Hopper, Ptxas, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case> &info) {
                             return info.param.name;
                         });

/** hopper::fast_div / fast_mod (the runtime header, compiled for the host by nvcc) against C's
 * / and %: divisors 1 to 2^31 - 1 (powers of two and their neighbours), dividends of both signs
 * up to 2^31 - 1, and a million random pairs. */
TEST(HopperRuntime, FastDivisionIsCDivision) {
    const std::string nvcc = find_nvcc();
    if (nvcc.empty())
        GTEST_SKIP() << "nvcc not found (/usr/local/cuda/bin/nvcc or PATH)";
    fs::path dir = fs::temp_directory_path() / ("tandem_fast_div_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / "fast_div.cu") << R"(#include "tandem_hopper.cuh"
#include <random>
int main() {
    long bad = 0;
    auto check = [&](int x, int d) {
        const hopper::Divisor divisor(d);
        if (hopper::fast_div(x, divisor) != x / d || hopper::fast_mod(x, divisor) != x % d) {
            if (bad++ < 5) std::printf("%d / %d: %d, C says %d\n", x, d, hopper::fast_div(x, divisor), x / d);
        }
    };
    std::vector<int> edges = {0, 1, 2, 3, 7, 1000, 2147483646, 2147483647};
    for (int k = 1; k < 31; k++)
        for (int e : {(1 << k) - 1, 1 << k, (1 << k) + 1}) edges.push_back(e);
    for (int d : edges)
        for (int x : edges) if (d > 0) { check(x, d); check(-x, d); }
    std::mt19937 rng(37);
    for (int i = 0; i < 1000000; i++) {
        const int d = i % 2 ? int(rng() % 2147483647u) + 1 : int(rng() % 5000) + 1;
        const int x = int(rng() % 2147483648u);
        check(i % 3 ? x : -x, d);
    }
    std::printf("%ld wrong\n", bad);
    return bad != 0;
}
)";
    Command build = run(nvcc + " -O2 -std=c++17 -I" TANDEM_HOPPER_RUNTIME_DIR " -o " +
                        (dir / "fast_div").string() + " " + (dir / "fast_div.cu").string());
    ASSERT_EQ(build.status, 0) << build.output;
    Command checked = run((dir / "fast_div").string());
    EXPECT_EQ(checked.status, 0) << checked.output;
    fs::remove_all(dir);
}

// ---- small and ragged shapes (the schedule fuzzer's): tiles padded, not refused ----

/** Extents below the hardware's granularity (M < 64, N or K < 64, rows under 16 bytes), tensors
 * with dims of extent 1, tiles whose rows are copied as one 1-D view, boxes wider than 256. The
 * kernels go through one nvcc run (a translation unit of all of them) to keep the test fast. */
std::vector<Case> padded_cases() {
    return {
        {"gemm_m7_ws", "gemm", "ws", {{"M", "7"}}, true, true},
        {"gemm_m114_ws_pingpong", "gemm", "ws_pingpong", {{"M", "114"}}, true, true},
        {"gemm_m127_pipelined", "gemm", "pipelined", {{"M", "127"}}, true, false},
        {"gemm_m72_n128_k128_ws",
         "gemm",
         "ws",
         {{"M", "72"}, {"N", "128"}, {"K", "128"}},
         true,
         true},
        {"gemm_m1_ws", "gemm", "ws", {{"M", "1"}}, true, true},
        {"gemm_m1_n8_k8_pipelined",
         "gemm",
         "pipelined",
         {{"M", "1"}, {"N", "8"}, {"K", "8"}},
         true,
         false},
        {"gemm_m3_n8_k16_ws_pingpong",
         "gemm",
         "ws_pingpong",
         {{"M", "3"}, {"N", "8"}, {"K", "16"}},
         true,
         true},
        {"gemm_tiles_48_ws",
         "gemm",
         "ws",
         {{"M", "256"}, {"N", "256"}, {"K", "256"}, {"TM", "48"}, {"TN", "48"}},
         true,
         true},
        {"gemm_1x1x1_ws", "gemm", "ws", {{"M", "1"}, {"N", "1"}, {"K", "1"}}, false, true},
        // A 1x1 tail tile after a 1 x 128 one: the epilogue keeps the main tile's row stride.
        {"gemm_m1_n129_k1_ws_pingpong",
         "gemm",
         "ws_pingpong",
         {{"M", "1"}, {"N", "129"}, {"K", "1"}},
         false,
         true},
        {"elementwise_w1_h288", "elementwise", "", {{"W", "1"}, {"H", "288"}}, false, false},
        {"elementwise_w2_h10", "elementwise", "", {{"W", "2"}, {"H", "10"}}, false, false},
        {"elementwise_w5_h1", "elementwise", "", {{"W", "5"}, {"H", "1"}}, false, false},
        {"elementwise_w255_h100", "elementwise", "", {{"W", "255"}, {"H", "100"}}, false, false},
        {"rmsnorm_d7_r2_sync", "rmsnorm", "sync", {{"D", "7"}, {"R", "2"}}, false, false},
        {"rmsnorm_d61_r8_rb4", "rmsnorm", "", {{"D", "61"}, {"R", "8"}, {"RB", "4"}}, false, false},
        {"rmsnorm_d1021_r8_rb4",
         "rmsnorm",
         "",
         {{"D", "1021"}, {"R", "8"}, {"RB", "4"}},
         false,
         false},
        // Runtime shapes: tensor maps encoded at launch from the extents, grid from the tile count.
        {"gemm_runtime_ws_pingpong", "gemm", "ws_pingpong", {{"shapes", "runtime"}}, true, true},
        {"gemm_runtime_ws_cooperative_tn256",
         "gemm",
         "ws_cooperative",
         {{"shapes", "runtime"}, {"TN", "256"}},
         true,
         true},
        {"gemm_runtime_ws", "gemm", "ws", {{"shapes", "runtime"}}, true, true},
        {"gemm_runtime_pipelined", "gemm", "pipelined", {{"shapes", "runtime"}}, true, false},
        {"elementwise_runtime", "elementwise", "", {{"shapes", "runtime"}}, false, false},
        {"rmsnorm_runtime", "rmsnorm", "", {{"shapes", "runtime"}}, false, false},
    };
}

/** The PTX of one kernel in a translation unit of several: from its .entry to the next. */
std::string entry_ptx(const std::string &ptx, const std::string &name) {
    // The kernels are C++ functions: _Z <length> <name> <parameter types>.
    size_t begin = ptx.find(".entry _Z" + std::to_string(name.size()) + name);
    if (begin == std::string::npos)
        return "";
    size_t end = ptx.find(".entry", begin + 6);
    return ptx.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

/** Assembles the kernels of one translation unit (one nvcc run keeps the test fast) and checks
 * that ptxas compiled `kernels` kernels without spills and kept setmaxnreg; `text` gets the PTX. */
void assemble_translation_unit(const std::string &all, const std::string &tag, size_t kernels,
                               std::string *text, std::string *ptxas_output = nullptr) {
    const std::string nvcc = find_nvcc();
    fs::path dir =
        fs::temp_directory_path() / ("tandem_hopper_" + tag + "_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    fs::path cu = dir / (tag + ".cu"), ptx = dir / (tag + ".ptx"), cubin = dir / (tag + ".cubin");
    std::ofstream(cu) << all;
    const std::string flags =
        " -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I" TANDEM_HOPPER_RUNTIME_DIR " ";
    Command to_ptx = run(nvcc + flags + "--ptx -o " + ptx.string() + " " + cu.string());
    ASSERT_EQ(to_ptx.status, 0) << "nvcc failed on " << cu << ":\n" << to_ptx.output;
    fs::path ptxas = fs::path(nvcc).parent_path() / "ptxas";
    Command assemble = run((fs::exists(ptxas) ? ptxas.string() : std::string("ptxas")) +
                           " -arch=sm_90a -v -o " + cubin.string() + " " + ptx.string());
    ASSERT_EQ(assemble.status, 0) << "ptxas failed on " << ptx << ":\n" << assemble.output;
    const std::regex spills("(\\d+) bytes spill stores, (\\d+) bytes spill loads");
    size_t found = 0;
    for (auto it = std::sregex_iterator(assemble.output.begin(), assemble.output.end(), spills);
         it != std::sregex_iterator(); ++it, ++found) {
        EXPECT_EQ((*it)[1], "0") << "spill stores:\n" << assemble.output;
        EXPECT_EQ((*it)[2], "0") << "spill loads:\n" << assemble.output;
    }
    EXPECT_EQ(found, kernels) << assemble.output;
    EXPECT_EQ(assemble.output.find("C7508"), std::string::npos) << "ptxas ignored setmaxnreg:\n"
                                                                << assemble.output;
    *text = read(ptx);
    if (ptxas_output)
        *ptxas_output = assemble.output;
    fs::remove_all(dir);
}

TEST(HopperShapes, PaddedKernelsAssembleWithoutSpills) {
    const std::string nvcc = find_nvcc();
    std::string all;
    std::map<std::string, int> floors;
    std::map<std::string, std::vector<std::string>>
        entries; // a runtime-shape kernel has a TMA variant and thread-copy ones
    size_t kernels = 0;
    for (const Case &c : padded_cases()) {
        std::string source;
        ASSERT_NO_THROW(source = hopper_backend::emit_cuda(compile_case(c), c.name)) << c.name;
        floors[c.name] = register_floor(source);
        all += source + "\n";
        // "// N variants: a, b and c; ..." (a TMA variant and thread-copy ones)
        std::smatch variants;
        static const std::regex listed("// \\d+ variants: ([^;]*);");
        entries[c.name] = {c.name};
        if (std::regex_search(source, variants, listed)) {
            entries[c.name].clear();
            static const std::regex name("[A-Za-z0-9_]+");
            const std::string names = variants[1];
            for (auto it = std::sregex_iterator(names.begin(), names.end(), name);
                 it != std::sregex_iterator(); ++it) {
                if (it->str() != "and")
                    entries[c.name].push_back(it->str());
            }
        }
        kernels += entries[c.name].size();
    }
    if (nvcc.empty())
        GTEST_SKIP() << "nvcc not found (/usr/local/cuda/bin/nvcc or PATH): the emitted CUDA is "
                        "not assembled";
    std::string text, ptxas_output;
    assemble_translation_unit(all, "shapes", kernels, &text, &ptxas_output);
    if (HasFatalFailure())
        return;
    for (const auto &[name, floor] : floors)
        expect_floor_met(ptxas_output, entries[name], floor);
    // Runtime shapes: a guard every call passes (a loop count of at least one) around a wgmma
    // wait made ptxas serialise the MMAs (C7517, C7518); such guards are dropped.
    EXPECT_EQ(ptxas_output.find("is injected"), std::string::npos) << ptxas_output;
    EXPECT_EQ(ptxas_output.find("are serialized"), std::string::npos) << ptxas_output;
    for (const Case &c : padded_cases()) {
        for (const std::string &name : entries[c.name]) {
            std::string entry = entry_ptx(text, name);
            ASSERT_FALSE(entry.empty()) << "no .entry for " << name;
            if (name == c.name || name == c.name + "_tma") {
                EXPECT_NE(entry.find("cp.async.bulk.tensor"), std::string::npos)
                    << "no TMA in " << name;
            }
            EXPECT_NE(entry.find("mbarrier.try_wait.parity"), std::string::npos)
                << "no mbarrier wait in " << name;
            if (c.mma) {
                EXPECT_NE(entry.find("wgmma.mma_async"), std::string::npos)
                    << "no wgmma in " << name;
            }
            if (c.warp_specialized) {
                EXPECT_NE(entry.find("setmaxnreg"), std::string::npos)
                    << "no setmaxnreg in " << name;
            }
        }
    }
}

// ---- thread copies: what TMA cannot move, the warpgroup's threads copy ----

/** Tiles TMA cannot move, each with the reason the emitted comment must give: global strides
 * that are not multiples of 16 bytes (MMA operands and plain tiles, loads and stores), K tiles
 * and store tiles whose padding would land in the middle of the tensor. */
std::vector<std::pair<Case, std::string>> thread_cases() {
    return {
        {{"gemm_k1001_ws", "gemm", "ws", {{"M", "256"}, {"N", "256"}, {"K", "1001"}}, true, true},
         "A has a global stride of 2002 bytes"},
        {{"gemm_n3_ws", "gemm", "ws", {{"M", "64"}, {"N", "3"}, {"K", "64"}}, true, true},
         "B has a global stride of 6 bytes"},
        {{"gemm_k31_ws_pingpong",
          "gemm",
          "ws_pingpong",
          {{"M", "183"}, {"N", "127"}, {"K", "31"}},
          true,
          true},
         "A has a global stride of 62 bytes"},
        {{"gemm_k2_n1_ws_pingpong",
          "gemm",
          "ws_pingpong",
          {{"M", "127"}, {"N", "1"}, {"K", "2"}},
          true,
          true},
         "A has a global stride of 4 bytes"},
        {{"gemm_k1_pipelined",
          "gemm",
          "pipelined",
          {{"M", "129"}, {"N", "128"}, {"K", "1"}},
          true,
          false},
         "A has a global stride of 2 bytes"},
        {{"gemm_tk32_ws",
          "gemm",
          "ws",
          {{"M", "256"}, {"N", "256"}, {"K", "256"}, {"TK", "32"}},
          true,
          true},
         "in the middle of A"},
        {{"elementwise_w807_h257", "elementwise", "", {{"W", "807"}, {"H", "257"}}, false, false},
         "a has a global stride of 3228 bytes"},
        {{"rmsnorm_d61_r109_rb2",
          "rmsnorm",
          "",
          {{"D", "61"}, {"R", "109"}, {"RB", "2"}},
          false,
          false},
         "out has a global stride of 244 bytes"},
    };
}

TEST(HopperShapes, ThreadCopiesAssembleWithoutSpills) {
    const std::string nvcc = find_nvcc();
    std::string all;
    for (const auto &[c, why] : thread_cases()) {
        std::string source;
        ASSERT_NO_THROW(source = hopper_backend::emit_cuda(compile_case(c), c.name)) << c.name;
        EXPECT_NE(source.find("thread copy"), std::string::npos) << c.name;
        EXPECT_NE(source.find(why), std::string::npos) << c.name << ": no '" << why << "'";
        all += source + "\n";
    }
    if (nvcc.empty())
        GTEST_SKIP() << "nvcc not found (/usr/local/cuda/bin/nvcc or PATH): the emitted CUDA is "
                        "not assembled";
    std::string text;
    assemble_translation_unit(all, "threads", thread_cases().size(), &text);
    if (HasFatalFailure())
        return;
    for (const auto &[c, why] : thread_cases()) {
        std::string entry = entry_ptx(text, c.name);
        ASSERT_FALSE(entry.empty()) << "no .entry for " << c.name;
        if (c.mma) {
            // Operands written swizzled by the threads, completed on the full barrier.
            EXPECT_NE(entry.find("st.shared.u16"), std::string::npos) << c.name;
            EXPECT_NE(entry.find("mbarrier.complete_tx"), std::string::npos) << c.name;
            EXPECT_NE(entry.find("wgmma.mma_async"), std::string::npos) << c.name;
        }
    }
}

/** A 128 x 256 output tile is staged through a ring of two 128-byte column blocks (the epilogue
 * writes and stores one block at a time), which leaves room for a fourth operand stage; the
 * model charges the ring, not the whole tile. */
TEST(HopperEpilogue, WideTilesStoreThroughAColumnBlockRing) {
    for (const char *out : {"bf16", "f32"}) {
        Case c{"ring",
               "gemm",
               "ws_cooperative",
               {{"M", "1000"}, {"N", "1000"}, {"K", "1000"}, {"TN", "256"}, {"out", out}}};
        Kernel kernel = compile_case(c);
        const std::string source = hopper_backend::emit_cuda(kernel, "ring");
        const int blocks = std::string(out) == "bf16" ? 4 : 8;
        EXPECT_NE(source.find("through a ring of 2 column blocks"), std::string::npos) << out;
        EXPECT_NE(source.find("column_block < " + std::to_string(blocks) + ";"), std::string::npos)
            << out;
        EXPECT_NE(source.find("hopper::bulk_wait_group_read<1>()"), std::string::npos) << out;
        bool noted = false;
        for (const std::string &n : kernel.notes)
            noted = noted || n.find("one column block at a time") != std::string::npos;
        EXPECT_TRUE(noted) << out;
        if (std::string(out) == "bf16") {
            // Notes name the Funcs in the user's words.
            EXPECT_NE(source.find("the staged copy of A for acc has 4 versions"), std::string::npos)
                << "4 operand stages";
        }
    }
    // Two column blocks or fewer: the whole tile, as before.
    Case narrow{"narrow", "gemm", "ws_pingpong", {{"M", "256"}, {"N", "256"}, {"K", "128"}}};
    EXPECT_EQ(hopper_backend::emit_cuda(compile_case(narrow), "narrow").find("column_block"),
              std::string::npos);
}

/** The tensor extents the tail checks of an emitted kernel compare with (their last argument). */
std::vector<std::string> checked_extents(const std::string &source) {
    std::vector<std::string> out;
    std::regex check("check_tail\\(tails_ok, .*, ([A-Za-z_0-9]+)\\);");
    for (auto i = std::sregex_iterator(source.begin(), source.end(), check);
         i != std::sregex_iterator(); ++i)
        out.push_back((*i)[1]);
    return out;
}

TEST(HopperTails, TheKTailsAreProvenAtCompileTime) {
    // A runtime-shape GEMM's operand tiles along K: the copy's extent is min(K - 64 ko, 64) at
    // coordinate 64 ko, so the box's part past the copy lies past A's edge, and past B's rows
    // where B's tensor map ends at the K rows the algorithm reads (A's extent: a taller B is
    // legal). The producer no longer checks a tail every k-step (session 36 on an H200: the checks
    // cost the 4096^3 kernel 0.905 against 0.987 of cuBLAS); the output's tiles end at C's edge
    // in the same way, so such a kernel checks nothing at run time.
    for (const char *schedule : {"ws_cooperative", "ws_pingpong"}) {
        Case c{"tails", "gemm", schedule, {{"shapes", "runtime"}, {"TN", "256"}}};
        if (std::string(schedule) == "ws_pingpong")
            c.params.erase("TN");
        const std::string source = hopper_backend::emit_cuda(compile_case(c), "tails");
        const std::vector<std::string> extents = checked_extents(source);
        EXPECT_TRUE(extents.empty()) << schedule << ": checks against " << extents.front();
        EXPECT_EQ(source.find("tails_ok"), std::string::npos) << schedule;
        // B's tensor map ends at C's columns and A's K (what the algorithm reads), A's at K and
        // C's rows.
        for (const char *map :
             {"\\{cuuint64_t\\(C_[0-9]+_extent_0\\), cuuint64_t\\(A_extent_0\\)\\}",
              "\\{cuuint64_t\\(A_extent_0\\), cuuint64_t\\(C_[0-9]+_extent_1\\)\\}"}) {
            EXPECT_TRUE(std::regex_search(
                source, std::regex(std::string("const cuuint64_t extents\\[2\\] = ") + map + ";")))
                << schedule << ": " << map;
        }
    }
}

TEST(HopperTails, ProofNeedsTheClampTheCoordinateAndItsBounds) {
    using namespace Halide;
    using Internal::Interval;
    const Expr K = Internal::Variable::make(Int(32), "A.extent.0"),
               M = Internal::Variable::make(Int(32), "A.extent.1");
    const Expr L = Internal::Variable::make(Int(32), "B.extent.1");
    const Expr ko = Internal::Variable::make(Int(32), "ko"),
               m = Internal::Variable::make(Int(32), "m");
    const std::vector<KernelArg::Dim> view = {{K, 1}, {M, K}};
    const std::vector<Expr> edges = {K, M};
    Internal::Scope<Interval> scope, facts;
    for (const char *name : {"A.extent.0", "A.extent.1", "B.extent.0", "B.extent.1"})
        facts.push(name, Interval(1, Interval::pos_inf()));
    scope.push("ko", Interval(0, (K + 63) / 64 - 1));
    scope.push("m", Interval(0, (M + 127) / 128 - 1));
    const Expr offset = (m * 128 * K) + ko * 64;
    auto proven = [&](const Expr &o, size_t d, const Expr &e,
                      const Internal::Scope<Interval> &s = Internal::Scope<Interval>()) {
        return hopper_backend::proven_tail_reach(o, view, d, e, s, edges, facts);
    };
    EXPECT_EQ(proven(offset, 0, min(K - ko * 64, 64), scope), 64);
    EXPECT_EQ(proven(offset, 0, max(min(K - ko * 64, 64), 0), scope), 64);
    // Another tensor's extent, no clamp, a coordinate off by one, or unbounded: not proven.
    EXPECT_EQ(proven(offset, 0, min(L - ko * 64, 64), scope), 0);
    EXPECT_EQ(proven(offset, 0, K - ko * 64, scope), 0);
    EXPECT_EQ(proven(offset + 1, 0, min(K - ko * 64, 64), scope), 0);
    EXPECT_EQ(proven(offset, 0, min(K - ko * 64, 64)), 0);
    // The outermost dim: rows m * 128 of A, whose extent is clamped against M.
    EXPECT_EQ(proven(m * 128 * K, 1, min(M - m * 128, 128), scope), 128);
    // Below it, ko * 64 must stay under the row stride K: by ko's loop bounds, not without them.
    EXPECT_EQ(proven(m * 128 * K + ko * 64, 1, min(M - m * 128, 128), scope), 128);
    Internal::Scope<Interval> rows_only;
    rows_only.push("m", Interval(0, (M + 127) / 128 - 1));
    EXPECT_EQ(proven(m * 128 * K + ko * 64, 1, min(M - m * 128, 128), rows_only), 0);
    // B (N x L, N innermost) read for its first K rows: the tail ends at K, its read extent.
    const Expr N = Internal::Variable::make(Int(32), "B.extent.0"),
               n = Internal::Variable::make(Int(32), "n");
    scope.push("n", Interval(0, (N + 255) / 256 - 1));
    const std::vector<KernelArg::Dim> b_view = {{N, 1}, {L, N}};
    const Expr b_offset = ko * 64 * N + n * 256;
    const Expr b_extent = min(K - ko * 64, 64);
    EXPECT_EQ(
        hopper_backend::proven_tail_reach(b_offset, b_view, 1, b_extent, scope, {N, K}, facts), 64);
    EXPECT_EQ(
        hopper_backend::proven_tail_reach(b_offset, b_view, 1, b_extent, scope, {N, L}, facts), 0)
        << "with B's map ending at its own rows, its padding may be B's data";
}

TEST(HopperEmitterErrors, RejectsOtherTargets) {
    const apps::App &app = apps::find_app("gemm");
    Kernel zpu = apps::compile_app(app, apps::with_defaults(app, apps::Params(), "zpu"),
                                   "pipelined", Target::parse("zpu"));
    EXPECT_THROW(hopper_backend::emit_cuda(zpu), Error);
}

} // namespace
