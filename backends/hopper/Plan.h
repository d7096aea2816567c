#ifndef TANDEM_HOPPER_PLAN_H
#define TANDEM_HOPPER_PLAN_H

/** \file
 * The Hopper emitter's plan (Emitter.h says what the emitted CUDA is): where each shared buffer
 * lives on the GPU, the tensor maps and TMA boxes of its copies, the wgmma tiles of each
 * accumulator, and the bytes each full barrier expects. The code generator (Emitter.cpp) only
 * prints what the plan decided. Every limit is a tandem::Error naming the buffer and the rule.
 */

#include "tandem/AsyncIR.h"
#include "tandem/Kernel.h"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tandem::hopper_backend {

constexpr int64_t swizzle_bytes = 128;       // a 128B-swizzled row; MMA operand column blocks
constexpr int64_t swizzle_atom_bytes = 1024; // 8 swizzled rows: the pattern repeats every 1024 B
constexpr int64_t max_box = 256;             // elements per TMA box dimension
constexpr int64_t max_shared_bytes = 232448; // per CTA on sm_90
constexpr int64_t max_accumulators = 128;    // f32 fragment registers per consumer thread

/** Variables the emitter itself declares are named "tandem.internal.<name>" in the IR it builds. */
extern const std::string internal_prefix;

/** A C identifier for an IR name: non-alphanumerics become '_'; names that would collide with the
 * emitter's own identifiers or C++ keywords get a trailing '_'. */
std::string c_name(const std::string &name);

std::string type_text(const Halide::Type &t);

bool proven(const Halide::Expr &e);

/** Calls every intrinsic statement and vector op of the control stream (not the element nests),
 * in program order. */
void for_each_op(const Halide::Internal::Stmt &s,
                 const std::function<void(const Halide::Internal::Stmt &)> &f);

enum class TileKind { Plain, MmaA, MmaB };

/** A shared-memory buffer on the GPU: versions of `slot_elements` at the Kernel's offset, each
 * holding a full tile (`box`, innermost first) in the layout its TMA view gives. */
struct Tile {
    const SramBuffer *buffer = nullptr;
    TileKind kind = TileKind::Plain;
    std::vector<int64_t> box;    // empty: no TMA copy touches it (the Stmt's layout is kept)
    bool dynamic_layout = false; // a copy's inner extent may be less than the box: the Stmt's
                                 // dense layout then differs from the full-tile layout
};

/** One CUtensorMap: a view of a kernel argument and the box one TMA instruction moves. */
struct TensorMap {
    std::string name, arg, buffer;
    bool load = true;
    Halide::Type type;
    std::vector<int64_t> extents, strides, box; // of the view, innermost first; strides in elements
    int64_t chunk = 0;                          // > 0: the argument's dim 0 is split into chunks
    bool swizzle = false;                       // 128B swizzle (MMA operands)
    int blocks = 1;                             // boxes per copy: 64-element column blocks
    int64_t block_bytes = 0;                    // shared memory between consecutive blocks
    int64_t box_bytes() const {
        int64_t n = type.bytes() * blocks;
        for (int64_t b : box)
            n *= b;
        return n;
    }
};

/** An MMA accumulator held in each consumer thread's registers as wgmma fragments. */
struct Accumulator {
    const SramBuffer *buffer = nullptr;
    std::string a, b;
    int64_t m = 0, n = 0, k = 0; // the full MMA tile
};

struct Plan {
    std::map<std::string, Tile> tiles;
    std::map<std::string, Accumulator> accumulators;
    std::vector<TensorMap> maps;
    std::map<std::string, int64_t> expect_bytes; // full-box bytes landing on each full barrier
    std::set<std::string> counters;              // ring positions (tandem_advance)
    std::set<std::string> phase_bits;    // mbarriers waited on with the waiter's own phase bits
    std::set<std::string> store_sources; // shared buffers TMA stores read (their empty barriers)
    int64_t shared_bytes = 0;            // dynamic shared memory (plus 1024 B of alignment slack)

    const TensorMap &map(const std::string &arg, const std::string &buffer, bool load) const {
        for (const TensorMap &m : maps) {
            if (m.arg == arg && m.buffer == buffer && m.load == load)
                return m;
        }
        internal_error << "hopper emitter: no tensor map for " << arg << " / " << buffer << "\n";
        return maps.front();
    }
};

/** The plan of `kernel`; throws tandem::Error where the GPU cannot run it. */
Plan plan_kernel(const Kernel &kernel);

} // namespace tandem::hopper_backend

#endif
