#include "answering/project_settings.h"

#include <algorithm>
#include <stdexcept>

namespace spanscope {

int64_t project_chunk_tokens(Project& project, std::string* warning) {
    auto q = project.db().prepare("SELECT value FROM settings WHERE key = 'chunk_tokens'");
    if (!q.step())
        return 1024;
    const std::string v = q.text(0);
    try {
        const long long n = std::stoll(v);
        if (n >= 16 && n <= 8192)
            return n;
    } catch (const std::exception&) {
    }
    if (warning)
        *warning =
            project.path() + " has an unusable chunk_tokens setting ('" + v + "'); using 1024";
    return 1024;
}

void set_project_chunk_tokens(Project& project, int64_t tokens) {
    if (tokens < 16 || tokens > 8192)
        throw std::invalid_argument("chunk size must be 16 to 8192 tokens, not " +
                                    std::to_string(tokens));
    project.db()
        .prepare("INSERT OR REPLACE INTO settings(key, value) VALUES ('chunk_tokens', ?)")
        .bind(1, std::to_string(tokens))
        .run();
}

ChunkingOptions chunking_for(Project& project, const Model& model) {
    ChunkingOptions o;
    o.target_tokens = project_chunk_tokens(project);
    const int64_t ctx = model.info().n_ctx_train;
    o.max_unit_tokens = ctx - std::min<int64_t>(1024, ctx / 4);
    o.chat_format = chat_format_of(model.info(), model.tokenizer());
    return o;
}

} // namespace spanscope
