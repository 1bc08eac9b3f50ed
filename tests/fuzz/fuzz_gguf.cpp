// libFuzzer target for the GGUF reader: any input must either parse or raise GgufError —
// never crash, hang, read out of bounds, overflow, or throw anything else (an escaping
// exception aborts the process, which libFuzzer reports as a crash).
// Build and run: docs/fuzzing.md.
#include "engine/gguf/gguf_reader.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        auto f = spanscope::GgufFile::from_memory(data, size);
        // Touch everything the reader hands out so that a bad pointer or length shows up
        // under AddressSanitizer here rather than in the engine.
        volatile size_t sink = f->version() + f->alignment() + f->file_size();
        volatile double fsink = 0;
        // Doubles are summed as doubles: converting NaN or -1.0 to size_t would be UB.
        auto touch = [&](auto x) {
            if constexpr (std::is_floating_point_v<decltype(x)>)
                fsink = fsink + x;
            else
                sink = sink + static_cast<size_t>(x);
        };
        for (const auto& [key, v] : f->metadata()) {
            sink = sink + key.size() + static_cast<size_t>(v.type);
            std::visit(
                [&](const auto& d) {
                    using D = std::decay_t<decltype(d)>;
                    if constexpr (std::is_same_v<D, std::string>) {
                        for (char c : d)
                            sink = sink + static_cast<unsigned char>(c);
                    } else if constexpr (std::is_same_v<D, std::vector<std::string>>) {
                        for (const auto& s : d)
                            sink = sink + s.size() + (s.empty() ? 0 : s.back());
                    } else if constexpr (requires { d.size(); }) {
                        for (auto x : d)
                            touch(x);
                    } else {
                        touch(d);
                    }
                },
                v.data);
            // The typed getters must also only ever raise GgufError.
            try {
                sink = sink + f->get_uint(key);
            } catch (const spanscope::GgufError&) {
            }
            try {
                fsink = fsink + f->get_float(key);
            } catch (const spanscope::GgufError&) {
            }
            try {
                sink = sink + f->get_int_array(key).size() + f->get_float_array(key).size();
            } catch (const spanscope::GgufError&) {
            }
        }
        for (const auto& t : f->tensors()) {
            sink = sink + static_cast<size_t>(t.n_elements()) + t.offset;
            for (size_t i = 0; i < t.nbytes; ++i)
                sink = sink + t.data[i];
            if (f->find_tensor(t.name) != &t)
                __builtin_trap(); // the name index must find every tensor
        }
        (void)sink;
        (void)fsink;
    } catch (const spanscope::GgufError&) {
        // Rejected input: the expected outcome for most mutations.
    }
    return 0;
}
