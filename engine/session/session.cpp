#include "engine/session/session.h"

#include "engine/kernels/matmul.h"
#include "engine/sekv/sekv_routing.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>

namespace spanscope {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
} // namespace

int64_t peak_rss_bytes() {
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<int64_t>(ru.ru_maxrss) * 1024; // Linux reports KiB
}

double whole_cache_fraction(const GenerationStats& s) {
    const int64_t as_full =
        s.memory.fast_tier_bytes - s.sekv.fast_tier_bytes + s.sekv.full_kv_bytes;
    return as_full > 0 ? static_cast<double>(s.memory.fast_tier_bytes + s.memory.host_tier_bytes) /
                             static_cast<double>(as_full)
                       : 0.0;
}

Session::Session(const Model& model, const SessionOptions& options)
    : model_(model), options_(options),
      n_ctx_(options.n_ctx > 0 ? options.n_ctx : model.info().n_ctx_train), pool_(options.threads) {
    if (options.ubatch < 1)
        throw std::invalid_argument("ubatch must be >= 1");
    if (n_ctx_ > model.info().n_ctx_train)
        throw std::invalid_argument("context of " + std::to_string(n_ctx_) +
                                    " tokens exceeds the model's " +
                                    std::to_string(model.info().n_ctx_train));
    set_blas_threads(1);
    memory_ = model.new_memory(n_ctx_, options.ubatch, options.global_policy, &options.sekv,
                               &options.eviction);
}

void Session::reset() {
    memory_.clear();
    n_past_ = 0;
    prefix_.reset();
}

void Session::adopt_memory(int64_t n_past) {
    if (n_past < 0 || n_past > n_ctx_)
        throw std::invalid_argument("adopted context of " + std::to_string(n_past) +
                                    " tokens is outside the context window of " +
                                    std::to_string(n_ctx_));
    n_past_ = n_past;
    prefix_.reset();
}

std::vector<float> Session::prefill(const std::vector<int32_t>& tokens,
                                    const std::atomic<bool>* cancel,
                                    const std::function<void(int64_t, int64_t)>& progress,
                                    float* surprisal, int32_t next_token) {
    const int64_t total = static_cast<int64_t>(tokens.size());
    if (total == 0)
        throw std::invalid_argument("prefill of no tokens");
    if (n_past_ + total > n_ctx_)
        throw ContextOverflow("prompt of " + std::to_string(n_past_ + total) +
                              " tokens exceeds the context window of " + std::to_string(n_ctx_) +
                              " tokens");
    std::vector<float> logits(static_cast<size_t>(model_.info().n_vocab));
    std::vector<int32_t> pos;
    for (int64_t done = 0; done < total;) {
        if (cancel && cancel->load())
            throw Cancelled();
        const int64_t n = std::min(options_.ubatch, total - done);
        pos.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
            pos[i] = static_cast<int32_t>(n_past_ + i);
        const bool last = done + n == total;
        std::vector<int64_t> rows;
        if (last)
            rows.push_back(n - 1);
        // Row i predicts token done + i + 1; the call's last row predicts next_token.
        std::vector<int32_t> targets;
        SurprisalRequest req;
        if (surprisal) {
            targets.resize(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i)
                targets[i] = done + i + 1 < total ? tokens[done + i + 1] : next_token;
            req.targets = targets.data();
            req.surprisal = surprisal + done;
        }
        try {
            model_.forward(tokens.data() + done, pos.data(), n, memory_, rows, logits.data(), pool_,
                           surprisal ? &req : nullptr, cancel);
        } catch (...) {
            // Some layers may have stored this ubatch and others not: start over clean.
            reset();
            throw;
        }
        n_past_ += n;
        tokens_processed_ += n;
        done += n;
        if (progress)
            progress(done, total);
    }
    return logits;
}

SealInfo Session::seal_context(const float* row_surprisal, int32_t pos_begin, int64_t n) {
    if (n < 1 || pos_begin < 0 || pos_begin + n > n_past_)
        throw std::invalid_argument("sealed context of " + std::to_string(n) +
                                    " tokens at position " + std::to_string(pos_begin) +
                                    " is not inside the memory's " + std::to_string(n_past_));
    SealInfo info;
    if (!row_surprisal) {
        if (memory_.needs_segmentation())
            throw std::invalid_argument("seal: the '" + options_.global_policy +
                                        "' memory needs the context's surprisal");
        info.token_surprisal.assign(static_cast<size_t>(n), 0.0f);
        seal_context(info.segmentation, info.token_surprisal, pos_begin);
        return info;
    }
    info.token_surprisal = token_surprisals(row_surprisal, n);
    info.segmentation = segment_within_budget(
        info.token_surprisal.data(), n, options_.sekv.segmentation, options_.sekv.budget,
        options_.sekv.reserve_rows, &info.alpha, &info.budget_met, sekv_span_rows(options_.sekv));
    seal_context(info.segmentation, info.token_surprisal, pos_begin);
    return info;
}

void Session::seal_context(const Segmentation& segmentation,
                           const std::vector<float>& token_surprisal, int32_t pos_begin) {
    const SealRequest request{&segmentation, token_surprisal.data(), pos_begin,
                              static_cast<int64_t>(token_surprisal.size())};
    for (const int il : memory_.sealing_layers())
        memory_.layer(il).seal(request);
}

ZoomStep Session::zoom_step() const {
    ZoomStep step;
    for (const int il : memory_.sealing_layers()) {
        const auto& layer = memory_.layer(il);
        if (const auto* z = layer.last_zoom())
            step.layers.push_back(LayerZoom{il, *z});
        const auto s = layer.stats();
        step.fast_tier_bytes += s.fast_tier_bytes;
        step.host_tier_bytes += s.host_tier_bytes;
    }
    return step;
}

namespace {
bool global_attention(const ModelMemory& m, int il) {
    return !m.is_recurrent(il) && m.layer(il).shape().window == 0;
}
} // namespace

bool Session::reports_sources() const {
    int n = 0;
    for (int il = 0; il < memory_.n_layers(); ++il)
        if (global_attention(memory_, il)) {
            if (!memory_.layer(il).reports_mass())
                return false;
            ++n;
        }
    return n > 0;
}

void Session::set_source_ranges(std::vector<std::pair<int32_t, int32_t>> ranges) {
    if (!ranges.empty() && !reports_sources())
        throw std::logic_error("this memory cannot report where an answer looked (sources)");
    source_ranges_ = std::move(ranges);
}

int Session::arm_sources(bool on) {
    int heads = 0;
    for (int il = 0; il < memory_.n_layers(); ++il)
        if (global_attention(memory_, il)) {
            memory_.layer(il).set_mass_sink(on ? &source_mass_ : nullptr);
            heads += memory_.layer(il).shape().n_head;
        }
    return heads;
}

void Session::expect_source_query(int64_t pos) {
    // The query sees positions up to its own: the work per token follows the context so far.
    source_mass_.reset(std::min(pos + 1, n_ctx_), static_cast<int32_t>(pos));
}

std::vector<float> Session::decode(int32_t token) {
    return prefill({token});
}

Answer Session::ask(const Prompt& prompt, int max_tokens, const SamplingParams& sampling,
                    const std::function<void(const std::string&)>& on_text,
                    const std::atomic<bool>* cancel) {
    const auto t0 = Clock::now();
    const int64_t n_prompt = static_cast<int64_t>(prompt.tokens.size());
    if (n_prompt == 0)
        throw std::invalid_argument("empty prompt");
    if (n_prompt > n_ctx_)
        throw ContextOverflow("prompt of " + std::to_string(n_prompt) +
                              " tokens exceeds the context window of " + std::to_string(n_ctx_) +
                              " tokens");
    Answer ans;
    ans.stats.prompt_tokens = n_prompt;
    const int64_t processed_before = tokens_processed_;
    // Reuse the cached document prefix when this prompt starts with it.
    std::vector<float> logits;
    int64_t start = 0;
    const bool hit =
        prefix_ && static_cast<int64_t>(prefix_->tokens.size()) <= n_prompt &&
        std::equal(prefix_->tokens.begin(), prefix_->tokens.end(), prompt.tokens.begin());
    if (hit) {
        memory_ = prefix_->memory.clone();
        n_past_ = static_cast<int64_t>(prefix_->tokens.size());
        start = n_past_;
        logits = prefix_->last_logits;
    } else {
        memory_.clear();
        n_past_ = 0;
        prefix_.reset();
        if (prompt.prefix_len > 0 && prompt.prefix_len < n_prompt) {
            std::vector<int32_t> head(prompt.tokens.begin(),
                                      prompt.tokens.begin() + prompt.prefix_len);
            if (memory_.sealing_layers().empty()) {
                logits = prefill(head, cancel);
            } else if (!memory_.needs_segmentation()) {
                logits = prefill(head, cancel); // an eviction baseline: no surprisal needed
                seal_context(nullptr, 0, static_cast<int64_t>(head.size()));
            } else {
                // The prefix is held at two resolutions: its segmentation needs the surprisal
                // of every token, computed in the same forward passes.
                std::vector<float> surprisal(head.size());
                logits = prefill(head, cancel, {}, surprisal.data(), prompt.tokens[head.size()]);
                seal_context(surprisal.data(), 0, static_cast<int64_t>(head.size()));
            }
            prefix_ = PrefixCache{head, memory_.clone(), logits};
            start = prompt.prefix_len;
        }
    }
    ans.stats.tokens_reused = hit ? start : 0;
    // Sources: the memory may have been replaced above; the query that produces the first token
    // is the prompt's last. (A prompt wholly cached has no such pass here: its first token gets
    // no mass.)
    const SourcesArmed armed(*this, !source_ranges_.empty());
    if (armed.on) {
        ans.source_heads = arm_sources(true);
        expect_source_query(n_prompt - 1);
    }
    if (start < n_prompt) {
        std::vector<int32_t> rest(prompt.tokens.begin() + start, prompt.tokens.end());
        logits = prefill(rest, cancel);
    }
    ans.stats.tokens_computed = tokens_processed_ - processed_before;
    generate(std::move(logits), prompt.format, max_tokens, sampling, on_text, cancel, t0, ans);
    return ans;
}

Answer
Session::answer_after_context(const std::vector<int32_t>& question, ChatFormat format,
                              int max_tokens, const SamplingParams& sampling,
                              const std::function<void(const std::string&)>& on_text,
                              const std::atomic<bool>* cancel,
                              const std::function<void(const std::vector<float>&)>& on_logits) {
    const auto t0 = Clock::now();
    if (question.empty())
        throw std::invalid_argument("empty question");
    Answer ans;
    ans.stats.prompt_tokens = n_past_ + static_cast<int64_t>(question.size());
    ans.stats.tokens_reused = n_past_;
    const int64_t processed_before = tokens_processed_;
    const SourcesArmed armed(*this, !source_ranges_.empty());
    if (armed.on) {
        ans.source_heads = arm_sources(true);
        expect_source_query(n_past_ + static_cast<int64_t>(question.size()) - 1);
    }
    auto logits = prefill(question, cancel);
    ans.stats.tokens_computed = tokens_processed_ - processed_before;
    generate(std::move(logits), format, max_tokens, sampling, on_text, cancel, t0, ans, on_logits);
    return ans;
}

void Session::generate(std::vector<float> logits, ChatFormat format, int max_tokens,
                       const SamplingParams& sampling,
                       const std::function<void(const std::string&)>& on_text,
                       const std::atomic<bool>* cancel, Clock::time_point t0, Answer& ans,
                       const std::function<void(const std::vector<float>&)>& on_logits) {
    ans.stats.prefill_ms = ms_since(t0);
    if (ans.stats.tokens_computed > 0 && ans.stats.prefill_ms > 0)
        ans.stats.prefill_tokens_per_s =
            ans.stats.tokens_computed / (ans.stats.prefill_ms / 1000.0);
    Sampler sampler(sampling);
    const auto& tok = model_.tokenizer();

    const auto t_decode = Clock::now();
    const int64_t processed_at_decode = tokens_processed_;
    Utf8Streamer stream;
    std::string raw;
    // on_text gets the answer's text as it becomes sure: a base model's last line waits while it
    // may still turn out to be the blank line or new question that ends the answer.
    size_t shown = 0;
    bool cut = false; ///< the stop rule ended the answer: what it held back is not the answer's
    auto show = [&](size_t upto) {
        if (upto <= shown)
            return;
        if (on_text)
            on_text(raw.substr(shown, upto - shown));
        shown = upto;
    };
    ans.stop_reason = "max_tokens";
    const bool trace = !memory_.sealing_layers().empty();
    for (int i = 0; i < max_tokens; ++i) {
        if (cancel && cancel->load()) {
            // Stop during generation keeps what was generated (the user pressed Stop).
            ans.stop_reason = "stopped";
            break;
        }
        if (on_logits)
            on_logits(logits);
        const int32_t next = sampler.sample(logits.data(), model_.info().n_vocab);
        if (i == 0)
            ans.stats.ttft_ms = ms_since(t0);
        if (tok.is_end_of_generation(next)) {
            ans.stop_reason = "eog";
            break;
        }
        ans.tokens.push_back(next);
        if (trace)
            ans.zoom.steps.push_back(zoom_step()); // the routing that produced this token
        if (ans.source_heads > 0) {
            // Where the pass that produced this token looked; then the next pass's query.
            const auto m = source_mass_.over_ranges(source_ranges_);
            ans.source_mass.emplace_back(m.begin(), m.end());
            expect_source_query(n_past_);
        }
        raw += stream.push(tok.token_bytes(next));
        show(answer_shown_length(format, raw));
        if (const auto reason = completion_stop_reason(format, raw); !reason.empty()) {
            ans.stop_reason = reason;
            cut = true;
            break;
        }
        if (i + 1 == max_tokens)
            break;
        if (n_past_ >= n_ctx_) {
            ans.stop_reason = "context_full";
            break;
        }
        logits = decode(next);
    }
    raw += stream.flush();
    // What a base model's stop rule held back and did not cut is part of the answer.
    if (!cut)
        show(raw.size());
    ans.stats.generated_tokens = static_cast<int64_t>(ans.tokens.size());
    ans.stats.decode_ms = ms_since(t_decode);
    // Decode speed counts the forward passes that decoding ran.
    const int64_t decoded = tokens_processed_ - processed_at_decode;
    if (decoded > 0 && ans.stats.decode_ms > 0)
        ans.stats.decode_tokens_per_s = decoded / (ans.stats.decode_ms / 1000.0);
    ans.stats.memory = memory_.total();
    ans.stats.policy = options_.global_policy;
    if (options_.global_policy == "sekv") {
        ans.stats.router = options_.sekv.router_params   ? kRouterTrained
                           : options_.sekv.router.oracle ? kRouterOracle
                                                         : kRouterTrainingFree;
        ans.stats.rerank = options_.sekv.router.rerank;
    }
    for (const int il : memory_.sealing_layers()) {
        const auto m = memory_.layer(il).stats();
        ans.stats.sekv_layers.emplace_back(il, m);
        ans.stats.sekv += m;
    }
    EvictionRule rule{};
    ans.stats.sekv_budget = eviction_rule_from_name(options_.global_policy, rule)
                                ? options_.eviction.budget
                                : options_.sekv.budget;
    ans.zoom.n_spans = static_cast<int>(
        ans.stats.sekv.spans /
        std::max<int64_t>(1, static_cast<int64_t>(memory_.sealing_layers().size())));
    ans.stats.expansions = ans.zoom.mean_expansions();
    ans.text = clean_answer(format, raw);
}

} // namespace spanscope
