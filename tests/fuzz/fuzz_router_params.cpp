// libFuzzer target for the trained router's parameter file reader: load_router_params() on any
// file either returns parameters that pass check_router_params (every size its shape, layers
// ascending, values finite) or throws RouterParamsError — never crashes, reads out of bounds,
// allocates for a forged size, or throws anything else.
//
// The reader takes a path, so the input (after its mode byte) is written to one file per process
// in $TMPDIR (or /tmp), rewritten for every input and removed at exit. Mode bit 0: expect the
// seeds' model fingerprint (seed_shapes.h), so a file for another model is refused; otherwise
// expect none. The file is a GGUF file without a checksum, so there is no re-sealing mode.
// Parameters it accepts are then used: both digests, and the router and rank gate built from every
// layer, the gate evaluated once. Build and run: docs/fuzzing.md.
#include "engine/sekv/router_params.h"
#include "engine/sekv/sekv_spans.h" // RankGatePredictor
#include "seed_shapes.h"

#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

using namespace spanscope;

namespace {

const std::string& input_path() {
    static const std::string path = [] {
        const char* dir = std::getenv("TMPDIR");
        return std::string(dir && *dir ? dir : "/tmp") + "/fuzz_router_params." +
               std::to_string(getpid()) + ".gguf";
    }();
    static const bool removed_at_exit = std::atexit([] { std::remove(path.c_str()); }) == 0;
    (void)removed_at_exit;
    return path;
}

void write_input(const uint8_t* data, size_t size) {
    std::FILE* f = std::fopen(input_path().c_str(), "wb");
    if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0)
        __builtin_trap(); // the scratch file must be writable: no result would mean anything
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1)
        return 0;
    const bool expect_model = data[0] & 1;
    write_input(data + 1, size - 1);
    RouterParams p;
    try {
        p = load_router_params(input_path(), expect_model ? fuzz::seed_fingerprint_hex() : "",
                               "the seeds' model");
    } catch (const RouterParamsError&) {
        return 0; // refused: the expected outcome for most inputs
    }
    if (expect_model && p.model_fingerprint != fuzz::seed_fingerprint_hex())
        __builtin_trap();
    check_router_params(p); // std::invalid_argument escaping: the reader let a bad file through
    volatile float fsink = 0;
    volatile size_t sink = p.digest().size() + p.rank_gate_digest().size();
    for (const auto& l : p.layers) {
        for (const auto* v :
             {&l.w, &l.theta, &l.gate.w1, &l.gate.b1, &l.gate.w2, &l.gate.b2, &l.sketch})
            for (const float x : *v) {
                if (!std::isfinite(x))
                    __builtin_trap();
                fsink = fsink + x;
            }
        sink = sink + static_cast<size_t>(trained_router(l).use_count());
        const std::vector<double> sigma2(static_cast<size_t>(l.gate.n_rank), 1.0);
        const std::vector<float> key(static_cast<size_t>(l.head_dim), 0.5f);
        const int rank = trained_rank_gate(l)->rank(sigma2, key.data(), l.head_dim);
        if (rank < 1 || rank > l.gate.n_rank)
            __builtin_trap();
    }
    return 0;
}
