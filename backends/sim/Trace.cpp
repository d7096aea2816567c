// Labels and the Chrome trace writer shared by the machine models. See Trace.h.

#include "sim/Trace.h"

#include <fstream>

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
