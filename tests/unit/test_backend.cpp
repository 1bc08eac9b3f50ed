// Choosing where the forward pass runs (backend.h), on any machine: names, the status of each
// backend, and a clear refusal of a backend that cannot run here (no build, no GPU).
#include "cli_runner.h"
#include "engine/model/backend.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace spanscope;
using namespace spanscope::test;

TEST(Backend, NamesRoundTripAndUnknownOnesAreRefused) {
    for (const std::string& n : backend_names())
        EXPECT_EQ(backend_name(backend_from_name(n)), n);
    try {
        backend_from_name("gpu");
        FAIL() << "an unknown backend was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("expected cpu or cuda"), std::string::npos);
    }
}

TEST(Backend, TheCpuAlwaysRunsAndCudaSaysWhereOrWhyNot) {
    EXPECT_TRUE(backend_status(Backend::Cpu).usable);
    const auto cuda = backend_status(Backend::Cuda);
    EXPECT_FALSE(cuda.detail.empty());
    std::printf("cuda backend: %s (%s)\n", cuda.usable ? "usable" : "not usable",
                cuda.detail.c_str());
#ifndef SPANSCOPE_HAVE_CUDA
    EXPECT_FALSE(cuda.usable);
    EXPECT_NE(cuda.detail.find("built without CUDA"), std::string::npos);
#endif
}

TEST(Backend, LoadingOnAnUnusableBackendNamesTheReason) {
    const std::string dir = temp_dir();
    const std::string path = dir + "/tiny.gguf";
    write_tiny_gemma3(path, TinyGemma3Config{});
    auto cpu = load_model(path, Backend::Cpu);
    EXPECT_STREQ(cpu->backend(), "cpu");
    const auto cuda = backend_status(Backend::Cuda);
    if (cuda.usable) {
        EXPECT_STREQ(load_model(path, Backend::Cuda)->backend(), "cuda");
    } else {
        try {
            load_model(path, Backend::Cuda);
            FAIL() << "the cuda backend loaded without a device";
        } catch (const BackendUnavailable& e) {
            EXPECT_NE(std::string(e.what()).find(cuda.detail), std::string::npos) << e.what();
        }
    }
    std::filesystem::remove_all(dir);
}

TEST(Backend, TheCommandLineRefusesAnUnknownBackendAndExplainsAnUnusableOne) {
    const std::string dir = temp_dir();
    const std::string path = dir + "/tiny.gguf";
    write_tiny_gemma3(path, TinyGemma3Config{});
    const auto bad = run_cli(dir, {}, {"bench", "--model", path, "--backend", "gpu"});
    EXPECT_EQ(bad.status, 2) << bad.err;
    if (!backend_status(Backend::Cuda).usable) {
        const auto r = run_cli(dir, {},
                               {"bench", "--model", path, "--backend", "cuda", "--lengths", "16",
                                "--decode-tokens", "2"});
        EXPECT_EQ(r.status, 1) << r.err;
        EXPECT_NE(r.err.find("cuda backend cannot run here"), std::string::npos) << r.err;
    }
    std::filesystem::remove_all(dir);
}
