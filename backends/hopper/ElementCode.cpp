// CodeGen's element nests (CodeGen.h): vector ops over shared tiles and over the accumulator's
// fragment registers, printed as ElementLoops.h mapped them.

#include "CodeGen.h"

namespace tandem::hopper_backend {

using namespace Halide::Internal;

std::string CodeGen::load(const Load *l) {
    if (plan.accumulators.count(l->name)) {
        internal_assert(fragment_buffers.count(l->name))
            << "hopper emitter: accumulator load outside its epilogue\n";
        return c_name(l->name) + fragment;
    }
    auto t = plan.tiles.find(l->name);
    internal_assert(t != plan.tiles.end())
        << "hopper emitter: load of " << l->name << " in an element nest\n";
    std::string v = c_name(l->name) + "[" + tile_index(t->second, l->index) + "]";
    const Halide::Type &type = t->second.buffer->type;
    if (type.is_bfloat())
        return "__bfloat162float(" + v + ")";
    return type.is_float() && type.bits() == 16 ? "__half2float(" + v + ")" : v;
}

std::string CodeGen::tile_index(const Tile &t, const Expr &index) {
    std::string i = gpu_index(t, index);
    if (!column_block || !t.ring_blocks)
        return i;
    // The element's column block lies in the ring's slot column_block % ring_blocks.
    const int64_t block = swizzle_bytes / t.buffer->type.bytes() * t.layout[1];
    return i + " - (column_block / " + std::to_string(t.ring_blocks) + ") * " +
           std::to_string(t.ring_blocks * block);
}

std::string CodeGen::gpu_index(const Tile &t, const Expr &index) {
    TileIndex x = map_tile_index(t, index, nest_loops);
    if (x.as_in_stmt)
        return expr(x.element);
    std::string outer = x.outer.empty() ? "" : c_name(x.outer),
                inner = x.inner.empty() ? "" : c_name(x.inner);
    if (t.on_chip && fragment_row.empty()) {
        throw Error("hopper: element code reaches the MMA operand " + t.buffer->name +
                    " made on chip outside the fragments of the matmul that makes it");
    }
    if (t.on_chip) {
        if (!x.version_start) {
            throw Error("hopper: the element code writes the MMA operand " + t.buffer->name +
                        " inside a version, not from its start; a matmul's operand made on chip "
                        "must be written whole, one tile per version");
        }
        outer = fragment_row, inner = fragment_col;
        x.rows_of_tile = true, x.outer_rows = 1, x.inner_columns = 1;
    }
    std::string r =
        is_const_zero(x.version) ? "" : expr(x.version) + " * " + std::to_string(t.slot_elements());
    auto add = [&](const std::string &term) { r += (r.empty() ? "" : " + ") + term; };
    // The row-major element within the version, placed in the swizzled column blocks: from
    // the nest's row and column where the index is row * W + column, else from the element.
    auto place = [&](const std::string &linear) {
        if (!t.swizzled)
            return linear;
        const std::string T = storage_type(t.buffer->type), rows = std::to_string(t.layout[1]);
        if (x.rows_of_tile && x.version_start)
            return "hopper::swizzled_128B<" + T + ", " + rows + ">(" +
                   (outer.empty() ? "0" : outer) + ", " + (inner.empty() ? "0" : inner) + ")";
        return "hopper::swizzled_128B<" + T + ", " + rows + ">((" + linear + ") / " +
               std::to_string(t.layout[0]) + ", (" + linear + ") % " + std::to_string(t.layout[0]) +
               ")";
    };
    if (!t.dynamic_layout) {
        add(place(expr(x.element)));
        return r;
    }
    std::string linear;
    if (!outer.empty())
        linear = outer + " * " + std::to_string(x.outer_rows * t.layout[0]);
    if (!inner.empty())
        linear += (linear.empty() ? "" : " + ") + inner +
                  (x.inner_columns == 1 ? "" : " * " + std::to_string(x.inner_columns));
    const int64_t offset = x.row_offset * t.layout[0] + x.column_offset;
    if (offset)
        linear += (linear.empty() ? "" : " + ") + std::to_string(offset);
    if (linear.empty())
        linear = "0";
    if (t.swizzled || linear != "0")
        add(place(linear));
    return r.empty() ? "0" : r;
}

void CodeGen::store(const Store *st) {
    if (st->name == held_name || st->name == internal_prefix + "partial") {
        // TileNest::held; a row reduction's partial (CodeGen::row_reduction)
        os << line() << c_name(st->name) << " = " << expr(st->value) << ";\n";
        return;
    }
    if (plan.accumulators.count(st->name)) { // in place (map_epilogue checked the element)
        internal_assert(fragment_buffers.count(st->name))
            << "hopper emitter: accumulator store outside its epilogue\n";
        os << line() << c_name(st->name) << fragment << " = " << expr(st->value) << ";\n";
        return;
    }
    auto t = plan.tiles.find(st->name);
    if (t == plan.tiles.end()) {
        throw Error("hopper: an element nest writes " + st->name + ", which is not a shared tile");
    }
    Expr value = st->value;
    std::string v;
    if (t->second.buffer->type.is_bfloat()) {
        const Cast *cast = value.as<Cast>();
        v = "__float2bfloat16_rn(" + expr(cast && cast->type.is_bfloat() ? cast->value : value) +
            ")";
    } else if (t->second.buffer->type.is_float() && t->second.buffer->type.bits() == 16) {
        const Cast *cast = value.as<Cast>();
        const bool to_f16 = cast && cast->type.is_float() && cast->type.bits() == 16;
        v = "__float2half_rn(" + expr(to_f16 ? cast->value : value) + ")";
    } else {
        v = expr(value);
    }
    os << line() << c_name(st->name) << "[" << tile_index(t->second, st->index) << "] = " << v
       << ";\n";
}

void CodeGen::element(const Stmt &s) {
    if (!s.defined())
        return;
    if (const For *f = s.as<For>()) {
        std::string v = c_name(f->name);
        nest_loops.push_back({f->name, f->min, f->extent});
        open("for (int " + v + " = " + expr(f->min) + ", " + v + "_end = " + v + " + " +
             expr(f->extent) + "; " + v + " < " + v + "_end; " + v + "++) {");
        element(f->body);
        close();
        nest_loops.pop_back();
    } else if (const LetStmt *l = s.as<LetStmt>()) {
        open("{");
        os << line() << "const " << expr.type_name(l->value.type()) << " " << c_name(l->name)
           << " = " << expr(l->value) << ";\n";
        element(l->body);
        close();
    } else if (const IfThenElse *i = s.as<IfThenElse>()) {
        open("if (" + condition(i->condition) + ") {");
        element(i->then_case);
        if (i->else_case.defined()) {
            close("} else {");
            scopes.emplace_back();
            indent++;
            element(i->else_case);
        }
        close();
    } else if (const Block *b = s.as<Block>()) {
        element(b->first);
        element(b->rest);
    } else if (const Store *st = s.as<Store>()) {
        store(st);
    } else {
        internal_error << "hopper emitter: unexpected statement in an element nest\n" << s << "\n";
    }
}

void CodeGen::vector_op(const ir::VectorOp &v, const Stmt &nest) {
    // An MMA operand made on chip from shared tiles (softmax's P) is written over the fragments
    // of the accumulator whose tile it has, which zero its padding.
    const Plan::FragmentUse use = plan.fragment_use(v, nest);
    switch (use.kind) {
    case Plan::FragmentUse::Kind::Zeroing:
        return zero_fragment(v, nest, use.acc);
    case Plan::FragmentUse::Kind::Epilogue:
        return epilogue(v, nest, use.acc);
    case Plan::FragmentUse::Kind::Operand:
        return epilogue(v, nest, use.acc, false);
    case Plan::FragmentUse::Kind::None:
        break;
    }
    flush();
    const TileNest n = map_tile_nest(plan, nest, role_threads());
    if (n.kind == TileNest::Kind::Elementwise) {
        parallel(v, n);
    } else if (n.kind == TileNest::Kind::Reduction) {
        reduction(v, n.loops, n.reduction);
    } else if (n.kind == TileNest::Kind::ThreadPerElement) {
        parallel(v, n);
    } else {
        os << line() << "// vector op " << v.label
           << ": one thread (not an elementwise nest or a single reduction)\n";
        open("if (elected) {");
        element(nest);
        close();
    }
    pending_sync = true;
    synced = false;
}

void CodeGen::parallel(const ir::VectorOp &v, const TileNest &n) {
    const bool whole = n.kind == TileNest::Kind::Elementwise;
    const std::vector<Loop> &loops = whole ? n.loops : n.strided;
    os << line() << "// vector op " << v.label << ": ";
    if (whole) {
        os << "elementwise";
    } else {
        for (const Loop &l : loops)
            os << (&l == &loops.front() ? "" : ", ") << l.name;
    }
    os << ", strided over the role's " << role_threads() << " threads"
       << (whole ? "" : ", the other loops in order in each thread") << "\n";
    open("{");
    const std::string total = declare_extents(loops, loops.size());
    nest_loops = loops;
    for (const auto &[name, load] : n.scalars) {
        os << line() << "const auto " << c_name(name) << " = " << expr(load)
           << "; // invariant in the nest\n";
    }
    nest_loops.clear();
    open("for (int element = " + role_thread() + "; element < " + total +
         "; element += " + std::to_string(role_threads()) + ") {");
    unflatten(loops, loops.size(), "element");
    nest_loops = loops;
    if (n.held) {
        const Halide::Type &t = n.held->value.type();
        os << line() << expr.type_name(t) << " " << c_name(held_name) << " = "
           << expr(Load::make(t, n.held->name, n.held->index, Halide::Buffer<>(), Parameter(),
                              const_true(), ModulusRemainder()))
           << "; // held in a register across the other loops\n";
    }
    element(n.code);
    if (n.held) {
        Stmt back = Store::make(n.held->name, Variable::make(n.held->value.type(), held_name),
                                n.held->index, n.held->param, n.held->predicate, n.held->alignment);
        store(back.as<Store>());
    }
    nest_loops.clear();
    close();
    close();
}

std::string CodeGen::declare_extents(const std::vector<Loop> &loops, size_t count) {
    std::string total;
    for (size_t i = 0; i < count; i++) {
        std::string n = c_name(loops[i].name);
        os << line() << "const int " << n << "_min = " << expr(loops[i].min) << ", " << n
           << "_extent = " << expr(loops[i].extent) << ";\n";
        total += (total.empty() ? "" : " * ") + n + "_extent";
    }
    return total;
}

void CodeGen::unflatten(const std::vector<Loop> &loops, size_t count, const std::string &flat) {
    std::string divisor;
    for (size_t i = count; i-- > 0;) {
        std::string n = c_name(loops[i].name);
        std::string e = divisor.empty() ? flat : flat + " / (" + divisor + ")";
        if (i > 0)
            e += " % " + n + "_extent";
        os << line() << "const int " << n << " = " << n << "_min + " << e << ";\n";
        divisor += (divisor.empty() ? "" : " * ") + n + "_extent";
    }
}

void CodeGen::reduction(const ir::VectorOp &v, const std::vector<Loop> &loops, const Reduction &r) {
    const Store *st = r.store;
    const Loop &k = loops.back();
    const Halide::Type &t = st->value.type();
    auto combine = [&](const Expr &x, const Expr &y) { return r.combine(x, y); };
    const Expr &identity = r.identity, &rest = r.rest;
    std::string type = expr.type_name(t);
    Expr partial = Variable::make(t, internal_prefix + "partial"),
         total = Variable::make(t, internal_prefix + "total");
    Expr x = Variable::make(t, internal_prefix + "x"), y = Variable::make(t, internal_prefix + "y");
    const std::string op =
        "[](" + type + " x, " + type + " y) { return " + expr(combine(x, y)) + "; }";
    Stmt update = Store::make(st->name, combine(r.self_load, total), st->index, st->param,
                              st->predicate, st->alignment);
    const int warps = role_threads() / 32;
    if (r.warp_per_row) {
        os << line() << "// vector op " << v.label << ": a reduction over " << k.name
           << " for each of the rows around it: a warp per row, partials strided over its "
              "lanes, "
              "then a shuffle reduction\n";
        open("{");
        const std::string total_rows = declare_extents(loops, loops.size() - 1);
        open("for (int row = " + role_thread() + " / 32; row < " + total_rows +
             "; row += " + std::to_string(warps) + ") {");
        unflatten(loops, loops.size() - 1, "row");
        nest_loops = loops;
        std::string n = c_name(k.name);
        os << line() << type << " partial = " << expr(identity) << ";\n";
        open("for (int " + n + " = " + expr(k.min) + " + " + role_thread() + " % 32, " + n +
             "_end = " + expr(k.min) + " + " + expr(k.extent) + "; " + n + " < " + n + "_end; " +
             n + " += 32) {");
        os << line() << "partial = " << expr(combine(partial, rest)) << ";\n";
        close();
        os << line() << "const " << type << " total = hopper::warp_reduce(partial, " << op
           << ");\n";
        open("if (" + role_thread() + " % 32 == 0) {");
        store(update.as<Store>());
        close();
        close();
        close();
        nest_loops.clear();
        return;
    }
    os << line() << "// vector op " << v.label << ": a reduction over " << k.name
       << "; partials strided over the warpgroup's threads, then a shuffle reduction\n";
    nest_loops = loops;
    for (size_t i = 0; i + 1 < loops.size(); i++) {
        std::string n = c_name(loops[i].name);
        open("for (int " + n + " = " + expr(loops[i].min) + ", " + n + "_end = " + n + " + " +
             expr(loops[i].extent) + "; " + n + " < " + n + "_end; " + n + "++) {");
    }
    open("{");
    std::string n = c_name(k.name);
    os << line() << type << " partial = " << expr(identity) << ";\n";
    open("for (int " + n + " = " + expr(k.min) + " + " + role_thread() + ", " + n +
         "_end = " + expr(k.min) + " + " + expr(k.extent) + "; " + n + " < " + n + "_end; " + n +
         " += " + std::to_string(role_threads()) + ") {");
    os << line() << "partial = " << expr(combine(partial, rest)) << ";\n";
    close();
    if (cooperative_role)
        os << line() << "const " << type << " total = hopper::consumers_reduce<" << role_threads()
           << ">(partial, &reduction_scratch[0][0],\n"
           << line() << "    " << op << ");\n";
    else
        os << line() << "const " << type
           << " total = hopper::warpgroup_reduce(partial, reduction_scratch[warpgroup], "
              "warpgroup,\n"
           << line() << "    " << op << ");\n";
    open("if (elected) {");
    store(update.as<Store>());
    close();
    close();
    for (size_t i = 0; i + 1 < loops.size(); i++)
        close();
    nest_loops.clear();
    uses_reduction = true;
}

void CodeGen::zero_fragment(const ir::VectorOp &v, const Stmt &nest, const std::string &acc) {
    check_zeroing(v, nest, acc);
    const Accumulator &a = plan.accumulators.at(acc);
    os << line() << "// zero the accumulator: each thread clears its " << blocks(a) << " x "
       << a.n / 2 << " fragment registers\n";
    os << line() << "#pragma unroll\n";
    open("for (int block = 0; block < " + std::to_string(blocks(a)) + "; block++) {");
    os << line() << "#pragma unroll\n";
    os << line() << "for (int i = 0; i < " << a.n / 2 << "; i++) " << c_name(acc)
       << "[block][i] = 0;\n";
    close();
}

std::string CodeGen::registers(const Accumulator &a, int64_t block_columns) const {
    if (!column_block)
        return "0; i < " + std::to_string(a.n / 2);
    internal_assert(block_columns > 0)
        << "hopper emitter: a column block epilogue without its ring\n";
    const std::string per = std::to_string(block_columns / 2);
    return per + " * column_block; i < " + per + " * column_block + " + per + " && i < " +
           std::to_string(a.n / 2);
}

namespace {

std::string row_value_name(size_t k) {
    return internal_prefix + "row_value" + std::to_string(k);
}

} // namespace

Stmt CodeGen::row_values(const FragmentEpilogue &e, const Stmt &body) {
    if (e.row_loads.empty())
        return body;
    // Each thread's registers hold two rows of a 64-row block: its row values, once per row.
    const std::string r = c_name(e.row);
    std::string arrays;
    for (size_t k = 0; k < e.row_loads.size(); k++)
        arrays += (k ? ", " : "") + c_name(row_value_name(k)) + "s[2]";
    os << line() << "float " << arrays << "; // the rows' values, loaded once per row\n";
    os << line() << "#pragma unroll\n";
    open("for (int half = 0; half < 2; half++) {");
    os << line() << "const int " << r
       << " = 64 * m64 + hopper::fragment_row(2 * half, thread_in_warpgroup);\n";
    for (size_t k = 0; k < e.row_loads.size(); k++)
        os << line() << c_name(row_value_name(k)) << "s[half] = " << r << " < rows ? "
           << expr(Expr(e.row_loads[k])) << " : 0.0f;\n";
    close();
    return replace_row_loads(e, body);
}

template <class IR> IR CodeGen::replace_row_loads(const FragmentEpilogue &e, IR ir) {
    for (size_t k = 0; k < e.row_loads.size(); k++)
        ir = substitute(Expr(e.row_loads[k]), Variable::make(Halide::Float(32), row_value_name(k)),
                        ir);
    return ir;
}

void CodeGen::declare_row_values(const FragmentEpilogue &e, const std::string &half) {
    for (size_t k = 0; k < e.row_loads.size(); k++)
        os << line() << "const float " << c_name(row_value_name(k)) << " = "
           << c_name(row_value_name(k)) << "s[" << half << "];\n";
}

void CodeGen::epilogue(const ir::VectorOp &v, const Stmt &nest, const std::string &acc,
                       bool reads) {
    flush();
    auto last = last_mma.find(acc);
    const FragmentEpilogue e = map_epilogue(
        plan, v, nest, acc, last == last_mma.end() || !reads ? nullptr : &last->second, reads);
    if (e.row_reduction)
        return row_reduction(v, e, acc);
    if (!e.ring_tile.empty() && !column_block) {
        deferred[e.ring_tile] = {v, nest, acc}; // emitted with its store, block by block
        return;
    }
    const Accumulator &a = plan.accumulators.at(acc);
    std::string r = c_name(e.row), c = c_name(e.col);
    os << line() << "// epilogue " << v.label
       << ": each thread applies the element code to its own wgmma fragment of "
       << e.accumulators[0]
       << (e.accumulators.size() > 1 ? " (and of each accumulator it reads)" : "")
       << " (register i of block m64 holds row 64 * m64 + fragment_row(i), column "
          "fragment_col(i))\n";
    open("{");
    os << line() << "const int rows = " << expr(e.rows) << ", cols = " << expr(e.cols) << ";\n";
    const std::string block = open_blocks(a);
    nest_loops = e.loops;
    fragment_buffers = {e.accumulators.begin(), e.accumulators.end()};
    const Stmt body = row_values(e, e.body);
    os << line() << "#pragma unroll\n";
    if (const Store *pair = e.pair) {
        // Registers i and i + 1 hold adjacent columns: one 4- or 8-byte store per pair.
        const Tile &tile = plan.tiles.at(pair->name);
        const std::string two = tile.buffer->type.is_bfloat() ? "__nv_bfloat162" : "float2";
        Expr value = body.as<Store>()->value;
        if (const Cast *cast = value.as<Cast>(); cast && cast->type.is_bfloat())
            value = cast->value;
        Expr next = substitute(e.col, Variable::make(Halide::Int(32), e.col) + 1, value);
        fragment = "[" + block + "][i]";
        std::string first = expr(value);
        fragment = "[" + block + "][i + 1]";
        std::string second = expr(next);
        fragment = "[" + block + "][i]";
        // (An operand made on chip is placed by the fragment's row and column.)
        if (tile.on_chip)
            fragment_row = r, fragment_col = c;
        std::string index = tile_index(tile, pair->index),
                    target = c_name(pair->name) + "[" + index + "]";
        open("for (int i = " + registers(a, e.block_columns) + "; i += 2) {");
        os << line() << "const int " << r
           << " = 64 * m64 + hopper::fragment_row(i, thread_in_warpgroup);\n";
        os << line() << "const int " << c
           << " = hopper::fragment_col(i, thread_in_warpgroup); // even\n";
        declare_row_values(e, "(i / 2) % 2");
        open("if (" + r + " < rows && " + c + " + 1 < cols) {");
        os << line() << "*reinterpret_cast<" << two << " *>(&" << target
           << ") = " << (tile.buffer->type.is_bfloat() ? "__floats2bfloat162_rn(" : "make_float2(")
           << first << ", " << second << ");\n";
        close("} else if (" + r + " < rows && " + c + " < cols) {");
        scopes.emplace_back();
        indent++;
        os << line() << target << " = "
           << (tile.buffer->type.is_bfloat() ? "__float2bfloat16_rn(" + first + ")" : first)
           << ";\n";
        // An operand made on chip: zeros outside the nest (the padding the next wgmma reads).
        const std::string zero =
            tile.buffer->type.is_bfloat() ? "__float2bfloat16_rn(0.0f)" : "0.0f";
        if (!e.operands.empty()) {
            // (the single store is the operand's: placed by the fragment's row and column)
            fragment_col = "(" + c + " + 1)";
            const std::string next_target =
                c_name(pair->name) + "[" + tile_index(tile, pair->index) + "]";
            fragment_col = c;
            os << line() << next_target << " = " << zero << ";\n";
            close("} else {");
            scopes.emplace_back();
            indent++;
            os << line() << target << " = " << zero << ";\n";
            os << line() << next_target << " = " << zero << ";\n";
        }
        fragment_row.clear(), fragment_col.clear();
        close();
        close();
    } else {
        open("for (int i = " + registers(a, e.block_columns) + "; i++) {");
        os << line() << "const int " << r
           << " = 64 * m64 + hopper::fragment_row(i, thread_in_warpgroup);\n";
        os << line() << "const int " << c << " = hopper::fragment_col(i, thread_in_warpgroup);\n";
        open("if (" + r + " < rows && " + c + " < cols) {");
        fragment = "[" + block + "][i]";
        fragment_row = r, fragment_col = c;
        declare_row_values(e, "(i / 2) % 2");
        element(body);
        zero_operands_outside(e);
        fragment_row.clear(), fragment_col.clear();
        close();
        close();
    }
    close_epilogue(a);
}

void CodeGen::row_reduction(const ir::VectorOp &v, const FragmentEpilogue &e,
                            const std::string &acc) {
    const Reduction &red = *e.row_reduction;
    const Accumulator &a = plan.accumulators.at(acc);
    const Halide::Type &t = red.store->value.type();
    const std::string type = expr.type_name(t), r = c_name(e.row), c = c_name(e.col);
    Expr partial = Variable::make(t, internal_prefix + "partial"),
         total = Variable::make(t, internal_prefix + "total");
    Stmt update = Store::make(red.store->name, red.combine(red.self_load, total), red.store->index,
                              red.store->param, red.store->predicate, red.store->alignment);
    os << line() << "// epilogue " << v.label << ": a reduction of each row of " << acc
       << " over its columns: each thread folds its fragment registers of a row, the row's four "
          "threads (a quad) shuffle, and the quad's first updates the element\n";
    open("{");
    os << line() << "const int rows = " << expr(e.rows) << ", cols = " << expr(e.cols) << ";\n";
    const std::string block = open_blocks(a);
    nest_loops = e.loops;
    fragment_buffers = {e.accumulators.begin(), e.accumulators.end()};
    os << line() << "#pragma unroll\n";
    open("for (int half = 0; half < 2; half++) { // the rows of registers i % 4 < 2, then >= 2");
    os << line() << "const int " << r
       << " = 64 * m64 + hopper::fragment_row(2 * half, thread_in_warpgroup);\n";
    for (size_t k = 0; k < e.row_loads.size(); k++)
        os << line() << "const float " << c_name(row_value_name(k)) << " = " << r << " < rows ? "
           << expr(Expr(e.row_loads[k])) << " : 0.0f; // once per row\n";
    // The element code: the fold into `partial` where the reduction's store was, beside the
    // body's elementwise stores (P beside its row sum).
    class Fold : public IRMutator {
    public:
        Fold(const Reduction &red, const Expr &partial) : red(red), partial(partial) {}

    private:
        using IRMutator::visit;
        const Reduction &red;
        const Expr &partial;
        Stmt visit(const Store *op) override {
            if (op != red.store)
                return op;
            return Store::make(internal_prefix + "partial", red.combine(partial, red.rest), Expr(0),
                               Parameter(), const_true(), ModulusRemainder());
        }
    };
    const Stmt body = replace_row_loads(e, Fold(red, partial).mutate(e.body));
    os << line() << type << " partial = " << expr(red.identity) << ";\n";
    os << line() << "#pragma unroll\n";
    open("for (int i = 2 * half; i < " + std::to_string(a.n / 2) +
         "; i += 4) { // registers i and i + 1 of each 8 columns");
    os << line() << "#pragma unroll\n";
    open("for (int pair = 0; pair < 2; pair++) {");
    os << line() << "const int " << c
       << " = hopper::fragment_col(i + pair, thread_in_warpgroup);\n";
    fragment = "[" + block + "][i + pair]";
    fragment_row = r, fragment_col = c;
    open("if (" + r + " < rows && " + c + " < cols) {");
    element(body);
    zero_operands_outside(e);
    close();
    close();
    close();
    fragment.clear();
    fragment_row.clear(), fragment_col.clear();
    const std::string op = "[](" + type + " x, " + type + " y) { return " +
                           expr(red.combine(Variable::make(t, internal_prefix + "x"),
                                            Variable::make(t, internal_prefix + "y"))) +
                           "; }";
    os << line() << "const " << type << " total = hopper::quad_reduce(partial, " << op << ");\n";
    open("if (thread_in_warpgroup % 4 == 0 && " + r + " < rows) {");
    store(update.as<Store>());
    close();
    close();
    close_epilogue(a);
}

void CodeGen::zero_operands_outside(const FragmentEpilogue &e) {
    if (e.operands.empty())
        return;
    close("} else {");
    scopes.emplace_back();
    indent++;
    for (const Store *st : e.operands) {
        const Stmt zero = Store::make(st->name, make_zero(st->value.type()), st->index, st->param,
                                      st->predicate, st->alignment);
        store(zero.as<Store>());
    }
}

void CodeGen::close_epilogue(const Accumulator &a) {
    fragment.clear();
    fragment_buffers.clear();
    nest_loops.clear();
    close_blocks(a);
    close();
    pending_sync = true;
    synced = false;
}

} // namespace tandem::hopper_backend
