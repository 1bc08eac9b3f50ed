// Per-project settings that decide how documents are cut and cached for a model: the chunk
// size and the unit (section) size (docs/linearkv.md).
#pragma once

#include "engine/model/model.h"
#include "engine/text/chunking.h"
#include "storage/project.h"

#include <cstdint>
#include <string>

namespace spanscope {

/// Chunk size (tokens) of a project: its "chunk_tokens" setting in [16, 8192], 1024 when unset.
/// An unusable stored value also gives 1024; *warning (when given) then says so.
int64_t project_chunk_tokens(Project& project, std::string* warning = nullptr);
/// Store the chunk size (tokens); throws std::invalid_argument outside [16, 8192].
void set_project_chunk_tokens(Project& project, int64_t tokens);

/// Chunking for `model` in `project`: the project's chunk size; units up to the model's context
/// minus what a question and its answer need (min(1024, context / 4) tokens).
ChunkingOptions chunking_for(Project& project, const Model& model);

} // namespace spanscope
