// Labels, the Chrome trace writer and the SVG timeline shared by the machine models. See Trace.h.

#include "sim/Trace.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

namespace tandem::sim::detail {

uint32_t Labels::id(const std::string &label) {
    auto it = ids_.find(label);
    if (it != ids_.end()) {
        return it->second;
    }
    uint32_t id = uint32_t(labels_.size());
    labels_.push_back(label);
    ids_.emplace(label, id);
    return id;
}

void TraceLog::add(uint32_t label, const char *category, int process, int track, Cycles start,
                   Cycles duration) {
    if (!on_) {
        return;
    }
    if (events_.size() >= kMaxTraceEvents) {
        truncated_ = true;
        return;
    }
    events_.push_back({label, int16_t(track), int32_t(process), category, start, duration});
}

void TraceLog::write(const std::string &path, const std::vector<TraceProcess> &processes,
                     const Labels &labels) const {
    if (!on_) {
        throw SimError("write_trace '" + path +
                       "': the machine was made with trace = false, so nothing was recorded");
    }
    std::ofstream out(path);
    if (!out) {
        throw SimError("write_trace: cannot open '" + path + "' for writing");
    }
    if (path.size() > 4 && path.compare(path.size() - 4, 4, ".svg") == 0) {
        write_svg(out, processes);
        if (!out)
            throw SimError("write_trace: writing '" + path + "' failed");
        return;
    }
    out << "{\"displayTimeUnit\": \"ns\", \"otherData\": {\"time_unit\": \"cycles\"},\n"
           "\"traceEvents\": [\n";
    bool first = true;
    auto separator = [&]() -> std::ostream & {
        out << (first ? "" : ",\n");
        first = false;
        return out;
    };
    for (const TraceProcess &process : processes) {
        separator() << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << process.id
                    << ", \"tid\": 0, \"args\": {\"name\": ";
        json_string(out, process.name);
        out << "}}";
        for (size_t t = 0; t < process.tracks.size(); ++t) {
            separator() << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << process.id
                        << ", \"tid\": " << t << ", \"args\": {\"name\": ";
            json_string(out, process.tracks[t]);
            out << "}}";
            separator() << "{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": "
                        << process.id << ", \"tid\": " << t << ", \"args\": {\"sort_index\": " << t
                        << "}}";
        }
    }
    for (const Event &e : events_) {
        separator() << "{\"name\": ";
        json_string(out, labels.text(e.label));
        out << ", \"cat\": \"" << e.category << "\", \"ph\": \"X\", \"ts\": " << e.start
            << ", \"dur\": " << e.duration << ", \"pid\": " << e.process << ", \"tid\": " << e.track
            << "}";
    }
    if (truncated_) {
        separator() << "{\"name\": \"trace truncated after " << kMaxTraceEvents
                    << " events\", \"ph\": \"i\", \"s\": \"g\", \"ts\": 0, \"pid\": 0, \"tid\": 0}";
    }
    out << "\n]}\n";
    if (!out) {
        throw SimError("write_trace: writing '" + path + "' failed");
    }
}

namespace {

/** Bar colours by op kind; waits and stalls are grey. */
const char *svg_colour(const std::string &kind) {
    static const std::map<std::string, const char *> colours = {
        {"dma", "#4c9f4c"},          {"tma_load", "#4c9f4c"}, {"thread_load", "#8fc98f"},
        {"DataCopy", "#4c9f4c"},     {"LoadData", "#7fbf7f"}, {"tma_store", "#2e86ab"},
        {"thread_store", "#7fb8d4"}, {"Fixpipe", "#2e86ab"},  {"mma", "#e07b24"},
        {"wgmma", "#e07b24"},        {"Mmad", "#e07b24"},     {"vector", "#8e5ea2"},
        {"dispatch", "#c8b560"},     {"SetFlag", "#c8b560"},  {"PipeBarrier", "#c8b560"}};
    auto it = colours.find(kind);
    if (it != colours.end())
        return it->second;
    return kind.find("wait") != std::string::npos || kind.find("stall") != std::string::npos ||
                   kind.find("Wait") != std::string::npos
               ? "#b0b0b0"
               : "#606060";
}

} // namespace

void TraceLog::write_svg(std::ostream &out, const std::vector<TraceProcess> &processes) const {
    Cycles end = 1;
    std::set<int> busy; // processes with events
    for (const Event &e : events_) {
        end = std::max(end, e.start + e.duration);
        busy.insert(e.process);
    }
    // Lanes: the first kSvgProcesses busy processes, each track that has events.
    std::vector<const TraceProcess *> shown;
    for (const TraceProcess &p : processes) {
        if (busy.count(p.id) && shown.size() < kSvgProcesses)
            shown.push_back(&p);
    }
    std::map<std::pair<int, int>, int> lane; // (process, track) -> row
    std::vector<std::string> lane_names;
    for (const TraceProcess *p : shown) {
        for (size_t t = 0; t < p->tracks.size(); ++t) {
            bool used = false;
            for (const Event &e : events_)
                used = used || (e.process == p->id && e.track == int(t));
            if (used) {
                lane[{p->id, int(t)}] = int(lane_names.size());
                lane_names.push_back(p->name + " " + p->tracks[t]);
            }
        }
    }
    const int left = 170, width = 1000, row = 22, top = 40;
    const size_t folded = busy.size() - shown.size();
    const int rows = int(lane_names.size()) + (folded ? 1 : 0);
    const int height = top + rows * row + 70;
    const double scale = double(width) / double(end);
    out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << left + width + 20
        << "\" height=\"" << height << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
        << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        << "<text x=\"" << left << "\" y=\"20\" font-size=\"13\">Timeline: " << end
        << " cycles; one lane per engine or agent, bars are ops, grey is waiting</text>\n";
    for (size_t r = 0; r < lane_names.size(); ++r) {
        const int y = top + int(r) * row;
        out << "<rect x=\"" << left << "\" y=\"" << y << "\" width=\"" << width << "\" height=\""
            << row - 4 << "\" fill=\"" << (r % 2 ? "#f4f4f4" : "#fafafa") << "\"/>\n<text x=\""
            << left - 6 << "\" y=\"" << y + row - 9 << "\" text-anchor=\"end\">" << lane_names[r]
            << "</text>\n";
    }
    // Bars, merged where adjacent ops of one kind fall within a pixel (a small file at any size).
    std::map<int, std::vector<const Event *>> by_lane;
    for (const Event &e : events_) {
        auto it = lane.find({e.process, e.track});
        if (it != lane.end())
            by_lane[it->second].push_back(&e);
    }
    std::set<std::string> kinds;
    for (auto &[r, list] : by_lane) {
        std::stable_sort(list.begin(), list.end(),
                         [](const Event *a, const Event *b) { return a->start < b->start; });
        const int y = top + r * row;
        double x0 = -1, x1 = -1;
        const char *kind = nullptr;
        auto flush = [&] {
            if (kind) {
                out << "<rect x=\"" << left + x0 << "\" y=\"" << y + 2 << "\" width=\""
                    << std::max(x1 - x0, 0.5) << "\" height=\"" << row - 8 << "\" fill=\""
                    << svg_colour(kind) << "\"><title>" << kind << "</title></rect>\n";
            }
        };
        for (const Event *e : list) {
            double a = double(e->start) * scale, b = double(e->start + e->duration) * scale;
            kinds.insert(e->category);
            if (kind && std::string(kind) == e->category && a <= x1 + 1.0) {
                x1 = std::max(x1, b);
                continue;
            }
            flush();
            kind = e->category;
            x0 = a;
            x1 = b;
        }
        flush();
    }
    int y = top + int(lane_names.size()) * row;
    if (folded) {
        out << "<text x=\"" << left << "\" y=\"" << y + 14 << "\">... and " << folded
            << " more cores or SMs, folded (the full trace: write a .json)</text>\n";
        y += row;
    }
    // Time axis and legend.
    for (int i = 0; i <= 4; ++i) {
        const int x = left + width * i / 4;
        out << "<line x1=\"" << x << "\" y1=\"" << top - 4 << "\" x2=\"" << x << "\" y2=\"" << y
            << "\" stroke=\"#cccccc\"/>\n<text x=\"" << x << "\" y=\"" << y + 14
            << "\" text-anchor=\"middle\">" << end * i / 4 << "</text>\n";
    }
    int x = left;
    for (const std::string &k : kinds) {
        out << "<rect x=\"" << x << "\" y=\"" << y + 30 << "\" width=\"12\" height=\"12\" fill=\""
            << svg_colour(k) << "\"/><text x=\"" << x + 16 << "\" y=\"" << y + 40 << "\">" << k
            << "</text>\n";
        x += 32 + int(k.size()) * 8;
    }
    out << "</svg>\n";
}

void json_string(std::ostream &out, const std::string &s) {
    out << '"';
    for (char ch : s) {
        unsigned char c = static_cast<unsigned char>(ch);
        switch (ch) {
        case '"':
            out << "\\\"";
            break;
        case '\\':
            out << "\\\\";
            break;
        case '\n':
            out << "\\n";
            break;
        case '\t':
            out << "\\t";
            break;
        case '\r':
            out << "\\r";
            break;
        default:
            if (c < 0x20) {
                static const char hex[] = "0123456789abcdef";
                out << "\\u00" << hex[c >> 4] << hex[c & 15];
            } else {
                out << ch;
            }
        }
    }
    out << '"';
}

} // namespace tandem::sim::detail
