// The driver of a fuzz target's corpus replay in builds without libFuzzer (gcc, the CI build):
// runs LLVMFuzzerTestOneInput once on every file of the directories (or files) given, in name
// order, as `fuzz_<target> -runs=0 <corpus>` does under libFuzzer. A harness signals a finding by
// crashing (an escaping exception, a failed check), so reaching the end is the pass. An empty
// or missing corpus fails, and so does an input that cannot be read: a replay of nothing proves
// nothing.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
    namespace fs = std::filesystem;
    std::vector<fs::path> inputs;
    for (int i = 1; i < argc; ++i) {
        const fs::path p = argv[i];
        std::error_code ec;
        if (fs::is_directory(p, ec)) {
            for (const auto& e : fs::directory_iterator(p))
                if (e.is_regular_file())
                    inputs.push_back(e.path());
        } else if (fs::is_regular_file(p, ec)) {
            inputs.push_back(p);
        } else {
            std::fprintf(stderr, "replay: no such file or directory: %s\n", argv[i]);
            return 2;
        }
    }
    if (inputs.empty()) {
        std::fprintf(stderr, "replay: no inputs (usage: %s CORPUS_DIR|FILE...)\n", argv[0]);
        return 2;
    }
    std::sort(inputs.begin(), inputs.end());
    for (const auto& p : inputs) {
        // An input that cannot be read fails the replay: read as empty, it would pass untested.
        std::error_code ec;
        const auto size = fs::file_size(p, ec);
        std::vector<uint8_t> bytes(ec ? 0 : size);
        std::ifstream in(p, std::ios::binary);
        if (ec || !in ||
            !in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size))) {
            std::fprintf(stderr, "replay: cannot read %s\n", p.c_str());
            return 2;
        }
        // A copy the size of the input, as libFuzzer hands it: reads past the end are caught by
        // a sanitizer build, not hidden by a larger buffer.
        auto* data = new uint8_t[bytes.size() ? bytes.size() : 1];
        std::copy(bytes.begin(), bytes.end(), data);
        LLVMFuzzerTestOneInput(data, bytes.size());
        delete[] data;
    }
    std::printf("replayed %zu inputs\n", inputs.size());
    return 0;
}
