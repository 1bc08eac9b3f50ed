// Timestamps of the project store: event and message times (UTC, ISO 8601) and the
// least-recently-used clock of chunk states (milliseconds since the epoch).
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>
#include <string>

namespace spanscope {

inline int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

inline std::string now_iso() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

} // namespace spanscope
