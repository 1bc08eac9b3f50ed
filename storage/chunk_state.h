// The chunk state blob: what the project store keeps per chunk and model (docs/linearkv.md, §4).
//
// Format version 1, all integers little-endian, fields naturally aligned:
//   offset size
//     0    8  magic "SSCHUNK\0"
//     8    4  format version (1)
//    12    4  byte-order mark 0x01020304 as written by the host (read back 04 03 02 01 on a
//             little-endian file; anything else is refused)
//    16   16  model fingerprint (model_fingerprint.h)
//    32    4  kind: 1 = attention rows of the chunk's tokens (global layers) + surprisal,
//                   2 = sliding-window tail (the last W-1 rows a continuation still sees),
//                   3 = recurrent states (hybrid models): every recurrent layer's state at
//                       the end of the chunk, its unit prefilled from a zero state
//    36    4  dtype: 1 = IEEE f16 (kinds 1, 2), 2 = IEEE f32 (kind 3)
//    40    4  n_layers   44 4 n_kv_head   48 4 head_dim
//    52    4  pos_begin (unit-local position of the first row; keys are rotated at it)
//    56    4  n_rows     60 4 n_surprisal (n_rows for kind 1, 0 for kind 2)
//    64    8  XXH3-64 of the chunk's token ids (int32 little-endian): every hit verifies them
//    72    8  payload bytes
//    80    8  XXH3-64 of the payload
//    88    8  XXH3-64 of header bytes [0, 88)
//    96       payload: u32 layer index [n_layers], 4 zero bytes when n_layers is odd; per
//             layer K then V, each f16 [n_rows][n_kv_head][head_dim]; f32 surprisal
//             [n_surprisal] (nats; row i's surprisal of the token after it, NaN for none).
// Size per token of kind 1 for Gemma 3 270M: 3 layers × 2 × 256 × 2 B + 4 B = 3 076 bytes.
//
// Kind 3 uses the same header with n_kv_head = head_dim = 0, pos_begin = 0, n_rows = the
// tokens the states stand for (the unit-local end of the chunk), n_surprisal = 0, and the
// token hash of the chunk's own ids. Its payload:
//     u32 layer index [n_layers], 4 zero bytes when n_layers is odd;
//     per layer, 24 bytes: u32 layer kind (1 = Mamba-2, 2 = Gated DeltaNet), u32 n_state,
//       u32 n_conv, u32 n_decay, u32 n_transition, u32 0;
//     per layer, f32: state [n_state] (Mamba-2 ssm [H][P][N]; Gated DeltaNet S
//       [n_v][d_v][d_k]), conv tail [n_conv] ([d_conv − 1][conv_dim]), log-decay sum
//       [n_decay] (Mamba-2: H, nats; Gated DeltaNet: 0), transition [n_transition]
//       (Gated DeltaNet: n_v·d_k·d_k when it was tracked, else 0; Mamba-2: 0).
// Every count is checked against the model's layer shapes before anything is read.
#pragma once

#include "engine/linearkv/state_initialiser.h" // RecurrentLayerState
#include "engine/memory/kv_rows.h"
#include "storage/model_fingerprint.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace spanscope {

enum class StateKind : uint32_t { AttentionRows = 1, SlidingTail = 2, RecurrentStates = 3 };
enum class StateDtype : uint32_t { F16 = 1, F32 = 2 };

constexpr uint32_t kChunkStateVersion = 1;
constexpr size_t kChunkStateHeaderBytes = 96;

/// A blob that must not be used; what() says why (checksum, fingerprint, shape, version...).
class StateError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct ChunkState {
    StateKind kind = StateKind::AttentionRows;
    Fingerprint fingerprint{};
    uint64_t token_hash = 0;
    int32_t pos_begin = 0;
    int64_t n_rows = 0;
    int n_kv_head = 0, head_dim = 0;
    std::vector<LayerRows> layers; ///< each: pos_begin, n_rows as above
    std::vector<float> surprisal;  ///< [n_rows] for AttentionRows, empty otherwise
    /// RecurrentStates: one per recurrent layer, ascending layer (empty otherwise).
    std::vector<RecurrentLayerState> recurrent;
};

/// What a RecurrentStates blob must hold for one recurrent layer (float counts).
struct RecurrentLayerShape {
    int layer = 0;
    bool mamba2 = true;     ///< else Gated DeltaNet
    int64_t state = 0;      ///< Mamba-2 H·P·N; Gated DeltaNet n_v·d_v·d_k
    int64_t conv = 0;       ///< (d_conv − 1)·conv_dim
    int64_t decay = 0;      ///< Mamba-2 H; Gated DeltaNet 0
    int64_t transition = 0; ///< Gated DeltaNet n_v·d_k·d_k (a blob may hold it or not)
};

/// The shapes of every recurrent layer of `info`, ascending layer.
std::vector<RecurrentLayerShape> recurrent_layer_shapes(const ModelInfo& info);

/// What a reader requires of a blob before it uses it.
struct StateExpectation {
    StateKind kind = StateKind::AttentionRows;
    Fingerprint fingerprint{};
    uint64_t token_hash = 0;
    int32_t pos_begin = 0;
    int64_t n_rows = 0;
    std::vector<int> layers;
    int n_kv_head = 0, head_dim = 0;
    std::vector<RecurrentLayerShape> recurrent; ///< RecurrentStates: what each layer holds
};

/// A state with the expectation's header fields and no rows yet (for the writer).
ChunkState state_header(const StateExpectation& e);

/// The n_rows field of an encoded blob's header (0 for a blob shorter than the header); for
/// bookkeeping only, decode_chunk_state() is what checks a blob.
int64_t chunk_state_rows(const std::vector<uint8_t>& blob);

/// XXH3-64 of token ids (as int32 little-endian).
uint64_t token_ids_hash(const std::vector<int32_t>& ids);

/// Serialise. Throws std::invalid_argument when the rows do not match the declared shape (a
/// RecurrentStates state: a layer without exactly one state, a Mamba-2 state with a transition).
std::vector<uint8_t> encode_chunk_state(const ChunkState& s);

/// Parse and check everything: size, magic, version, byte order, header checksum, the
/// expected kind, fingerprint, token hash, positions, layers and shapes, payload size and
/// checksum. Throws StateError naming the first mismatch.
ChunkState decode_chunk_state(const uint8_t* data, size_t size, const StateExpectation& expect);

} // namespace spanscope
