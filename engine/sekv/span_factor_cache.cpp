#include "engine/sekv/span_factor_cache.h"

#include <stdexcept>
#include <string>

namespace spanscope {

SpanFactorCache::SpanFactorCache(int slots) {
    reset(slots);
}

void SpanFactorCache::reset(int slots) {
    if (slots < 0)
        throw std::invalid_argument("span factor cache: negative slot count");
    counters_.evictions += static_cast<int64_t>(held_.size());
    slots_ = slots;
    free_.clear();
    for (int s = slots - 1; s >= 0; --s)
        free_.push_back(s);
    lru_.clear();
    held_.clear();
}

void SpanFactorCache::clear() {
    reset(slots_);
    counters_ = Counters{};
}

int SpanFactorCache::find(int32_t key) const {
    const auto it = held_.find(key);
    return it == held_.end() ? -1 : it->second.slot;
}

void SpanFactorCache::touch(int32_t key) {
    auto& e = held_.at(key);
    lru_.splice(lru_.begin(), lru_, e.it);
}

int SpanFactorCache::take_slot(const std::unordered_map<int32_t, int>& protect) {
    if (!free_.empty()) {
        const int s = free_.back();
        free_.pop_back();
        return s;
    }
    for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
        if (protect.count(*it))
            continue;
        const int32_t victim = *it;
        const int s = held_.at(victim).slot;
        lru_.erase(std::next(it).base());
        held_.erase(victim);
        ++counters_.evictions;
        return s;
    }
    return -1;
}

std::vector<SpanFactorCache::Placement> SpanFactorCache::acquire(const std::vector<int32_t>& keys) {
    if (static_cast<int64_t>(keys.size()) > slots_)
        throw std::length_error("span factor cache: " + std::to_string(keys.size()) +
                                " spans at once, " + std::to_string(slots_) + " slots");
    std::unordered_map<int32_t, int> wanted;
    for (size_t i = 0; i < keys.size(); ++i)
        if (!wanted.emplace(keys[i], static_cast<int>(i)).second)
            throw std::invalid_argument("span factor cache: span " + std::to_string(keys[i]) +
                                        " asked for twice");
    std::vector<Placement> out(keys.size());
    // Hits first, so that no miss evicts a key that is wanted.
    for (size_t i = 0; i < keys.size(); ++i) {
        const int s = find(keys[i]);
        if (s < 0)
            continue;
        out[i] = Placement{s, false};
        touch(keys[i]);
        ++counters_.hits;
    }
    for (size_t i = 0; i < keys.size(); ++i) {
        if (held_.count(keys[i]))
            continue;
        const int s = take_slot(wanted); // cannot fail: keys.size() <= slots_
        lru_.push_front(keys[i]);
        held_[keys[i]] = Entry{s, lru_.begin()};
        out[i] = Placement{s, true};
        ++counters_.misses;
    }
    return out;
}

std::vector<std::pair<size_t, int>> SpanFactorCache::prefetch(const std::vector<int32_t>& keys) {
    std::unordered_map<int32_t, int> wanted;
    for (size_t i = 0; i < keys.size() && wanted.size() < static_cast<size_t>(slots_); ++i)
        wanted.emplace(keys[i], static_cast<int>(i));
    std::vector<std::pair<size_t, int>> out;
    for (size_t i = 0; i < keys.size() && i < static_cast<size_t>(slots_); ++i) {
        if (held_.count(keys[i])) {
            touch(keys[i]);
            continue;
        }
        const int s = take_slot(wanted);
        if (s < 0)
            break;
        lru_.push_front(keys[i]);
        held_[keys[i]] = Entry{s, lru_.begin()};
        out.emplace_back(i, s);
        ++counters_.prefetches;
    }
    return out;
}

} // namespace spanscope
