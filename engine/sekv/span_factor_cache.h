// The bookkeeping of SEKV's device cache of span factors (cuda/cuda_sekv_memory.h): a fixed
// number of equal slots, each holding one span's packed factors (span_factor_pack.h), reused
// least recently used first. Plain C++ (no CUDA): it decides which slot each span goes to and
// whether it must be copied; the device memory does the copies. Spans are named by a key (their
// first position: unique within a layer, and the same span in every SEKV layer, so that one
// layer can prefetch for the next).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <utility>
#include <vector>

namespace spanscope {

class SpanFactorCache {
public:
    /// Where a span's factors are: its slot, and whether the caller must copy them there now.
    struct Placement {
        int slot = 0;
        bool fetch = false;
    };
    /// Counters since construction or clear().
    struct Counters {
        int64_t hits = 0;       ///< spans found in their slot by acquire()
        int64_t misses = 0;     ///< spans acquire() had to fetch
        int64_t prefetches = 0; ///< spans placed by prefetch()
        int64_t evictions = 0;  ///< spans dropped to make room, or by reset()
    };

    explicit SpanFactorCache(int slots = 0);
    int slots() const { return slots_; }
    /// Slots for the distinct keys `keys`, all held together (an attention call needs every
    /// expanded span at once): a key held keeps its slot (a hit); the others take a free slot or
    /// evict the least recently used key not among `keys`. Every key becomes most recently used.
    /// Returns one placement per key, in order. Throws std::length_error when there are more
    /// keys than slots, std::invalid_argument for a repeated key.
    std::vector<Placement> acquire(const std::vector<int32_t>& keys);
    /// Placements for the keys not held among the first slots() of `keys`, in order, as far as
    /// they fit: each takes a free slot or evicts the least recently used key (never one of
    /// those). Keys already held count nothing and become most recently used. Returns the pairs
    /// (key index into `keys`, slot) the caller must copy.
    std::vector<std::pair<std::size_t, int>> prefetch(const std::vector<int32_t>& keys);
    /// The slot of `key`, or -1.
    int find(int32_t key) const;
    /// Forget every key (counted as evictions) and take `slots` slots. Throws
    /// std::invalid_argument for a negative count.
    void reset(int slots);
    /// Forget every key and zero the counters.
    void clear();
    const Counters& counters() const { return counters_; }

private:
    /// A slot for a key not held: a free one, else the least recently used key's not in
    /// `protect` (-1 when every held key is protected).
    int take_slot(const std::unordered_map<int32_t, int>& protect);
    void touch(int32_t key);

    int slots_ = 0;
    std::vector<int> free_;  ///< free slots
    std::list<int32_t> lru_; ///< keys held, most recently used first
    struct Entry {
        int slot;
        std::list<int32_t>::iterator it;
    };
    std::unordered_map<int32_t, Entry> held_;
    Counters counters_;
};

} // namespace spanscope
