// A test suite sharing one tiny Gemma 3 model (tiny_model.h), written once per suite into a
// temporary directory and removed after it.
#pragma once

#include "engine/model/model.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace spanscope::test {

/// Base: ::testing::Test or ::testing::TestWithParam<T>.
template <class Base = ::testing::Test> class TinyGemma3Suite : public Base {
protected:
    static void SetUpTestSuite() {
        dir_ = new std::string(temp_dir());
        TinyGemma3Config cfg;
        write_tiny_gemma3(*dir_ + "/tiny.gguf", cfg);
        model_ = Model::load(*dir_ + "/tiny.gguf").release();
    }
    static void TearDownTestSuite() {
        std::filesystem::remove_all(*dir_);
        delete model_;
        delete dir_;
    }
    static const Tokenizer& tok() { return model_->tokenizer(); }
    static inline std::string* dir_ = nullptr;
    static inline Model* model_ = nullptr;
};

} // namespace spanscope::test
