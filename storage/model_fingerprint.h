// Identities of a model for the project store: stored chunk states are only used with the
// model (and the engine numerics) that computed them, and chunk token ids only with the
// tokenizer that produced them.
#pragma once

#include "engine/model/model.h"
#include "engine/text/chunking.h"

#include <array>
#include <cstdint>
#include <string>

namespace spanscope {

/// 128-bit XXH3 hash of: the chunk-state numerics version of the engine (f16 K/V, RoPE
/// layout), the weights file's size, every metadata key and value (architecture parameters and
/// the whole tokenizer included), every tensor's name, type, shape and offset, and samples of
/// every tensor's bytes (its first, middle and last 4 KiB). Reads at most ~3 × 4 KiB per tensor,
/// so it takes milliseconds, and a re-quantised or fine-tuned file differs in it.
using Fingerprint = std::array<uint8_t, 16>;
Fingerprint model_fingerprint(const Model& model);

/// Which model file this is, as lower-case hex (32 characters): the same hash as
/// model_fingerprint's without the engine's numerics version, so it changes with the file's
/// weights and metadata, never with the engine. Chats record it with each answer
/// (answering/chat_history.h): a chat continued under another model starts its history afresh.
std::string model_identity_hex(const Model& model);

/// Lower-case hex of a fingerprint (32 characters).
std::string fingerprint_hex(const Fingerprint& f);

/// 64-bit XXH3 hash of the tokenizer.* metadata, as 16 hex characters.
std::string tokenizer_hash(const Model& model);

/// Everything the token ids of a document's chunks depend on besides its text: the tokenizer
/// hash and the chunking options, e.g. "tok=0123456789abcdef;chunk=1024;unit=31744;style=text"
/// (style: the unit header's chat format, "text" Completion, "turns" Gemma, else its name).
std::string chunking_key(const Model& model, const ChunkingOptions& options);

} // namespace spanscope
