#ifndef TANDEM_SIM_TRACE_H
#define TANDEM_SIM_TRACE_H

/** \file
 * Internal to the machine models (Zpu.cpp, Hopper*.cpp, Ascend*.cpp): op labels interned once, and
 * the Chrome/Perfetto trace (JSON): one process per core or SM, one track ("tid") per engine or
 * agent, one complete ("X") event per op. At most kMaxTraceEvents events are kept; a trace cut
 * there says so in an instant event.
 *
 * A path ending in ".svg" gets a picture of the overlap instead: one lane per engine or agent of
 * each core or SM (the first kSvgProcesses that did anything; the rest are folded into a line
 * that says how many), ops as bars coloured by kind, waits and stalls in grey, so that one sees
 * at a glance whether the data movement hides behind the compute.
 */

#include "sim/Common.h"

#include <cstdint>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

namespace tandem::sim::detail {

constexpr size_t kMaxTraceEvents = 2000000;
constexpr size_t kSvgProcesses = 4;

/** Op labels by small id (race names and trace events keep the id, not the string). */
class Labels {
public:
    uint32_t id(const std::string &label);
    const std::string &text(uint32_t id) const { return labels_[id]; }

private:
    std::vector<std::string> labels_;
    std::unordered_map<std::string, uint32_t> ids_;
};

struct TraceProcess {
    int id;                          // Chrome "pid"
    std::string name;                // "core 3", "SM 0"
    std::vector<std::string> tracks; // Chrome "tid" = index
};

class TraceLog {
public:
    explicit TraceLog(bool on) : on_(on) {}
    bool on() const { return on_; }
    /** `category` is a string literal (the op kind). Nothing happens when tracing is off. */
    void add(uint32_t label, const char *category, int process, int track, Cycles start,
             Cycles duration);
    /** Chrome trace JSON, or the SVG timeline for a path ending in ".svg". Throws SimError when
     * tracing was off or the file cannot be written. */
    void write(const std::string &path, const std::vector<TraceProcess> &processes,
               const Labels &labels) const;

private:
    void write_svg(std::ostream &out, const std::vector<TraceProcess> &processes) const;
    struct Event {
        uint32_t label;
        int16_t track;
        int32_t process;
        const char *category;
        Cycles start, duration;
    };
    bool on_;
    bool truncated_ = false;
    std::vector<Event> events_;
};

/** Writes `s` as a JSON string literal. */
void json_string(std::ostream &out, const std::string &s);

} // namespace tandem::sim::detail

#endif
