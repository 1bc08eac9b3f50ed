// The context of a project answer: the documents' units chosen to fit (ranked against the
// question when they do not all fit, unit_choice.h), their stored states restored into the
// answering session — computed first where missing —, and joined as LinearKV assembles them
// (engine/linearkv/pic_assembly.h) or, under SEKV, as spans (sekv_unit.h). Used by ask_project.
#pragma once

#include "answering/answer_sources.h"
#include "answering/project_answer.h"
#include "answering/sekv_unit.h" // SekvLayerBytes

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace spanscope {

/// What assemble_context put into the answering session, for the answer's statistics.
struct ContextAssembly {
    std::vector<ChosenUnit> chosen; ///< the units in context order
    int skipped = 0;                ///< units left out (they did not fit)
    int candidates = 0;             ///< units of the documents asked about
    std::string ranking;            ///< how the units were ranked (empty: all fit)
    int64_t ranking_tokens = 0;     ///< forwarded for the question's SEKV queries
    int64_t restored = 0;           ///< rows restored from the store (tokens)
    int64_t offset = 0;             ///< tokens in the context: where the question starts
    int recomputed_units = 0;       ///< units computed first (no usable stored state)
    double compute_ms = 0;          ///< wall time spent computing prompt tokens: those units, the
                                    ///< LinearKV recompute pass (ms)
    /// SEKV: where each section's spans sit among the context's spans, how many spans, the
    /// states built now, and what the SEKV structures take on disk per layer (bytes).
    std::vector<ZoomSource> sources;
    int64_t spans = 0;
    int sekv_built = 0;
    std::vector<SekvLayerBytes> structure_bytes;
    /// LinearKV: each section's first position, whether its rows count as restored, the
    /// concatenated token ids, the recompute pass.
    std::vector<int64_t> starts;
    std::vector<char> reused_section;
    std::vector<int32_t> tokens;
    AssemblyStats pic;
    /// Hybrid models: each section's recurrent states at its end, in context order.
    std::vector<std::vector<RecurrentLayerState>> unit_states;
    /// The passages an answer may cite, in context order (answer_sources.h: SEKV spans under
    /// sekv, else sentences), and the text of each document they are in, by id.
    std::vector<SourcePassage> passages;
    std::map<int64_t, std::string> texts;
};

/// Choose the units of documents `ids` (in that order) that fit beside `question` and q's
/// max_tokens, and restore them into `session`, computing the missing ones in `scratch`: before
/// that, hooks.on_wait (else hooks.on_note) is told how many sections and tokens are computed
/// first; their progress goes to hooks.on_ingest_progress. `session` then holds the context and
/// continues after it. Notes for the user on the answer (sections left out) are appended to
/// `notes` and sent to hooks.on_note. Throws ContextOverflow when no unit fits, Cancelled when
/// `cancel` is set, and passes on what the store and the engine throw (StateError, ModelError, …).
ContextAssembly assemble_context(Project& project, const Model& model, StateCache& cache,
                                 Session& scratch, Session& session,
                                 const std::vector<int64_t>& ids,
                                 const std::vector<int32_t>& question, const ProjectQuestion& q,
                                 const ProjectAskHooks& hooks, const std::atomic<bool>* cancel,
                                 std::vector<std::string>& notes);

} // namespace spanscope
