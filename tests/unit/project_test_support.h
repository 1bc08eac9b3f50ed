// What test_project, test_project_search and test_project_states share: a fixture with a folder
// of its own for each test, a unit of one chunk, and the count of the full-text index's rows.
#pragma once

#include "storage/project.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace spanscope::test {

/// A unit of one chunk of `tokens` covering the bytes [0, chars) of a document's text.
inline DocumentUnit one_chunk_unit(int index, int64_t chars, std::vector<int32_t> tokens) {
    DocumentUnit u;
    u.index = index;
    TextChunk c;
    c.char_end = chars;
    c.tokens = std::move(tokens);
    c.token_chars.assign(c.tokens.size(), 0);
    u.chunks.push_back(c);
    u.char_end = chars;
    return u;
}

/// The rows of `p`'s full-text index of units (unit_text).
inline int64_t index_rows(Project& p) {
    auto q = p.db().prepare("SELECT count(*) FROM unit_text");
    q.step();
    return q.int64(0);
}

/// Each test in a folder of its own (dir_), removed after it.
class ProjectTest : public ::testing::Test {
protected:
    void SetUp() override { dir_ = temp_dir(); }
    void TearDown() override { std::filesystem::remove_all(dir_); }
    std::string dir_;
};

} // namespace spanscope::test
