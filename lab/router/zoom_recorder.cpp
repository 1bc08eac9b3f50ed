#include "lab/router/zoom_recorder.h"

#include "engine/memory/memory_full.h"
#include "engine/memory/memory_recording.h"
#include "engine/sekv/memory_sekv.h"
#include "engine/sekv/sekv_spans.h"
#include "engine/session/session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

namespace spanscope {

namespace {

// P(j) = softmax_j(scale · q·k_{g,j}) over rows j = 0..p of one query head, in double.
// q: [head_dim]; k: [rows][n_kv_head][head_dim]; prob: [p + 1] out.
void head_probabilities(const float* q, const float* k, int n_kv_head, int head_dim, int g,
                        float scale, int32_t p, std::vector<double>& prob) {
    prob.assign(static_cast<size_t>(p) + 1, 0.0);
    const size_t stride = static_cast<size_t>(n_kv_head) * static_cast<size_t>(head_dim);
    double max = -std::numeric_limits<double>::infinity();
    for (int32_t j = 0; j <= p; ++j) {
        const float* kj = k + static_cast<size_t>(j) * stride + static_cast<size_t>(g) * head_dim;
        double dot = 0;
        for (int c = 0; c < head_dim; ++c)
            dot += static_cast<double>(q[c]) * static_cast<double>(kj[c]);
        prob[static_cast<size_t>(j)] = static_cast<double>(scale) * dot;
        max = std::max(max, prob[static_cast<size_t>(j)]);
    }
    double sum = 0;
    for (auto& x : prob) {
        x = std::exp(x - max);
        sum += x;
    }
    for (auto& x : prob)
        x /= sum;
}

// The spans visible to query position p: a prefix of the ascending spans.
size_t visible_spans(const std::vector<TokenSpan>& spans, int32_t p, int32_t tail) {
    size_t n = 0;
    while (n < spans.size() && spans[n].end <= static_cast<int64_t>(p) - tail)
        ++n;
    return n;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

std::string zoom_record_settings_key(const ZoomRecordSettings& s) {
    const SekvOptions sekv;
    std::ostringstream o;
    o << "max_tokens=" << s.max_tokens << " queries=" << s.queries << " tail=" << s.tail
      << " budget=" << s.budget << " first_query=" << s.first_query
      << " query_stride=" << s.query_stride << " min_separation=" << s.min_separation
      << " alpha=" << sekv.segmentation.alpha << " min_span=" << sekv.segmentation.min_span
      << " max_span=" << sekv.segmentation.max_span << " reserve_rows=" << sekv.reserve_rows;
    if (s.recall_probes > 0)
        o << " recall_probes=" << s.recall_probes << " probe_tokens=" << s.probe_tokens
          << (s.probe_form == ZoomProbeForm::Question ? " probe_form=question"
              : s.probe_form == ZoomProbeForm::Fact   ? " probe_form=fact"
                                                      : "");
    return o.str();
}

void check_zoom_record_settings(const ZoomRecordSettings& s) {
    auto bad = [](const std::string& what) { throw std::invalid_argument(what); };
    if (s.max_tokens < 2 || s.max_tokens > std::numeric_limits<int32_t>::max())
        bad("max_tokens must be at least 2 (BOS and a token)");
    if (s.queries < 0)
        bad("queries must be >= 0");
    if (s.tail < 0)
        bad("tail must be >= 0");
    if (!std::isfinite(s.budget))
        bad("budget must be a finite fraction");
    if (s.first_query < 1)
        bad("first_query must be >= 1");
    if (s.query_stride < 1)
        bad("query_stride must be >= 1");
    if (s.min_separation < 0)
        bad("min_separation must be >= 0");
    if (s.recall_probes < 0)
        bad("recall_probes must be >= 0");
    if (s.recall_probes > 0 && s.probe_tokens < 8)
        bad("probe_tokens must be >= 8");
    if (static_cast<int64_t>(s.recall_probes) * s.probe_tokens > s.max_tokens / 2)
        bad("the recall probes would take more than half of max_tokens");
}

std::vector<int32_t> zoom_recall_probes(std::vector<int32_t> doc, const ZoomRecordSettings& s,
                                        std::vector<int32_t>* probe_starts) {
    check_zoom_record_settings(s);
    if (s.recall_probes > 0 && s.probe_form != ZoomProbeForm::Copy)
        throw std::invalid_argument(
            "question and fact probes are made by zoom_question_probes and zoom_fact_probes");
    const int64_t room = s.max_tokens - static_cast<int64_t>(s.recall_probes) * s.probe_tokens;
    if (static_cast<int64_t>(doc.size()) > room)
        doc.resize(static_cast<size_t>(room));
    if (probe_starts)
        probe_starts->clear();
    if (s.recall_probes == 0)
        return doc;
    const int64_t n_doc = static_cast<int64_t>(doc.size()), L = s.probe_tokens;
    if (n_doc < 1 + 2 * L)
        throw std::invalid_argument("a document of " + std::to_string(n_doc) +
                                    " tokens is too short for recall probes of " +
                                    std::to_string(L) + " tokens");
    const double step = static_cast<double>(n_doc - 1 - L) / s.recall_probes;
    for (int i = 0; i < s.recall_probes; ++i) {
        const auto a = static_cast<int64_t>(1 + (i + 0.5) * step);
        if (probe_starts)
            probe_starts->push_back(static_cast<int32_t>(a));
        const std::vector<int32_t> run(doc.begin() + a, doc.begin() + a + L);
        doc.insert(doc.end(), run.begin(), run.end());
    }
    return doc;
}

std::vector<int32_t> zoom_document_tokens(const Tokenizer& tok, const std::string& text,
                                          int64_t max_tokens) {
    if (max_tokens < 1)
        throw std::invalid_argument("max_tokens must be >= 1");
    std::vector<int32_t> ids;
    if (tok.add_bos() && tok.bos() >= 0) // as every prompt starts (prompt.h)
        ids.push_back(tok.bos());
    const auto body = tok.encode(text);
    ids.insert(ids.end(), body.begin(), body.end());
    if (static_cast<int64_t>(ids.size()) > max_tokens)
        ids.resize(static_cast<size_t>(max_tokens));
    return ids;
}

std::vector<int32_t> zoom_query_candidates(int64_t n_tokens, const ZoomRecordSettings& s) {
    std::vector<int32_t> out;
    if (s.first_query < 1 || s.query_stride < 1)
        throw std::invalid_argument("first_query and query_stride must be >= 1");
    for (int64_t p = s.first_query; p < n_tokens; p += s.query_stride)
        out.push_back(static_cast<int32_t>(p));
    return out;
}

double zoom_reach(const float* q, const float* k, int n_head, int n_kv_head, int head_dim,
                  float scale, int32_t p, const std::vector<TokenSpan>& spans, int32_t tail) {
    if (n_head < 1 || n_kv_head < 1 || n_head % n_kv_head != 0 || head_dim < 1 || p < 0)
        throw std::invalid_argument("zoom_reach: bad shape or position");
    const size_t n_vis = visible_spans(spans, p, tail);
    std::vector<double> prob;
    double total = 0;
    for (int h = 0; h < n_head; ++h) {
        head_probabilities(q + static_cast<size_t>(h) * head_dim, k, n_kv_head, head_dim,
                           h / (n_head / n_kv_head), scale, p, prob);
        for (size_t s = 0; s < n_vis; ++s)
            for (int64_t j = spans[s].begin; j < spans[s].end; ++j)
                total += prob[static_cast<size_t>(j)];
    }
    return total / n_head;
}

std::vector<int32_t> select_zoom_queries(const std::vector<int32_t>& candidates,
                                         const std::vector<double>& reach, int queries,
                                         int32_t min_separation) {
    if (candidates.size() != reach.size())
        throw std::invalid_argument("select_zoom_queries: " + std::to_string(reach.size()) +
                                    " reaches for " + std::to_string(candidates.size()) +
                                    " candidates");
    std::vector<size_t> order(candidates.size());
    for (size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    // Candidates are ascending, so the stable sort breaks ties by the earlier position.
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return reach[a] > reach[b]; });
    std::vector<int32_t> kept;
    for (const size_t i : order) {
        if (static_cast<int>(kept.size()) >= queries)
            break;
        const int64_t p = candidates[i];
        const bool apart = std::all_of(kept.begin(), kept.end(), [&](int32_t k) {
            return std::llabs(p - static_cast<int64_t>(k)) >= min_separation;
        });
        if (apart)
            kept.push_back(candidates[i]);
    }
    std::sort(kept.begin(), kept.end());
    return kept;
}

ZoomRecording record_zoom(const Model& model, const std::vector<int32_t>& tokens,
                          const ZoomRecordSettings& settings, int threads,
                          const std::atomic<bool>* cancel,
                          const std::function<void(int64_t, int64_t)>& progress) {
    check_zoom_record_settings(settings);
    const int64_t n = static_cast<int64_t>(tokens.size());
    const auto& info = model.info();
    if (n < 2 || n > settings.max_tokens || n > info.n_ctx_train)
        throw std::invalid_argument(
            "a recorded document needs 2 to " +
            std::to_string(std::min<int64_t>(settings.max_tokens, info.n_ctx_train)) +
            " tokens, not " + std::to_string(n));
    const SekvOptions sekv; // the defaults SEKV seals a document with (budget: the setting's)
    const std::vector<int> layer_ids = sekv_layers(info, sekv);
    if (layer_ids.empty())
        throw std::invalid_argument("the model has no layer SEKV serves (global attention with "
                                    "full-head RoPE)");
    const auto candidates = zoom_query_candidates(n, settings);
    const int32_t first = settings.first_query, stride = settings.query_stride;
    auto is_candidate = [first, stride](int32_t p) {
        return p >= first && (p - first) % stride == 0;
    };

    // Full attention everywhere; the SEKV layers' memories are wrapped to record the queries
    // and outputs at the candidates (the model sees its usual memory).
    SessionOptions so;
    so.threads = threads;
    so.n_ctx = n;
    so.global_policy = "full";
    Session session(model, so);
    std::vector<const RecordingMemory*> recorders;
    for (const int il : layer_ids) {
        const auto& shape = info.layers[static_cast<size_t>(il)].attn;
        auto rec =
            std::make_unique<RecordingMemory>(std::make_unique<FullMemory>(shape, n), is_candidate);
        recorders.push_back(rec.get());
        session.memory().replace(il, std::move(rec));
    }
    ZoomRecording out;
    ZoomRecord& r = out.record;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<float> row_surprisal(static_cast<size_t>(n));
    session.prefill(tokens, cancel, progress, row_surprisal.data(), -1);
    out.prefill_seconds = seconds_since(t0);

    // The segmentation SEKV would seal this document with (Session::seal_context).
    r.tokens = tokens;
    r.token_surprisal = token_surprisals(row_surprisal.data(), n);
    const Segmentation seg =
        segment_within_budget(r.token_surprisal.data(), n, sekv.segmentation, settings.budget,
                              sekv.reserve_rows, &out.alpha, &out.budget_met);
    r.spans = seg.spans;
    r.budget = settings.budget;
    r.tail = settings.tail;
    r.settings = zoom_record_settings_key(settings);

    for (size_t li = 0; li < layer_ids.size(); ++li) {
        const int il = layer_ids[li];
        const LayerInfo& L = info.layers[static_cast<size_t>(il)];
        ZoomRecordLayer l;
        l.layer = il;
        l.n_head = L.attn.n_head;
        l.n_kv_head = L.attn.n_kv_head;
        l.head_dim = L.attn.head_dim;
        l.scale = L.attn.scale;
        // A record keeps the RoPE base alone (zoom_record.h): scaled frequencies would be lost.
        if (L.rope.scale != 1.0 || !L.rope.factors.empty())
            throw std::invalid_argument("layer " + std::to_string(il) +
                                        " scales its RoPE frequencies; zoom records hold a "
                                        "plain RoPE base only");
        l.rope_base = L.rope.base;
        std::vector<int32_t> pos;
        const int64_t rows =
            recorders[li]->read_rows(0, std::numeric_limits<int32_t>::max(), l.k, l.v, pos);
        if (rows != n)
            throw std::logic_error("layer " + std::to_string(il) + " holds " +
                                   std::to_string(rows) + " rows after a prefill of " +
                                   std::to_string(n));
        r.layers.push_back(std::move(l));
    }

    // The q of a candidate in layer li, as the layer received it.
    auto query_of = [&](size_t li, int32_t p) {
        const int64_t i = recorders[li]->find_recorded(p);
        if (i < 0)
            throw std::logic_error("no query recorded at position " + std::to_string(p));
        const auto& l = r.layers[li];
        return recorders[li]->recorded_q().data() + i * l.n_head * l.head_dim;
    };

    // Mining: each candidate's reach, averaged over the SEKV layers.
    out.candidates = candidates;
    out.reach.assign(candidates.size(), 0.0);
    session.pool().parallel_for(
        static_cast<int64_t>(candidates.size()), [&](int64_t begin, int64_t end, int) {
            for (int64_t c = begin; c < end; ++c) {
                const int32_t p = candidates[static_cast<size_t>(c)];
                double sum = 0;
                for (size_t li = 0; li < r.layers.size(); ++li) {
                    const auto& l = r.layers[li];
                    sum += zoom_reach(query_of(li, p), l.k.data(), l.n_head, l.n_kv_head,
                                      l.head_dim, l.scale, p, r.spans, r.tail);
                }
                out.reach[static_cast<size_t>(c)] = sum / static_cast<double>(r.layers.size());
            }
        });
    r.query_pos =
        select_zoom_queries(candidates, out.reach, settings.queries, settings.min_separation);

    // The kept queries: q, out and the mass on each visible span per query head.
    const size_t n_spans = r.spans.size();
    const size_t nq = r.query_pos.size();
    std::vector<double> prob, y;
    for (size_t li = 0; li < r.layers.size(); ++li) {
        auto& l = r.layers[li];
        const size_t row = static_cast<size_t>(l.n_head) * static_cast<size_t>(l.head_dim);
        const size_t kv_stride = static_cast<size_t>(l.n_kv_head) * l.head_dim;
        l.q.resize(nq * row);
        l.out.resize(nq * row);
        l.span_mass.assign(nq * static_cast<size_t>(l.n_head) * n_spans, 0.0f);
        for (size_t i = 0; i < nq; ++i) {
            const int32_t p = r.query_pos[i];
            const int64_t at = recorders[li]->find_recorded(p);
            std::copy_n(recorders[li]->recorded_q().data() + at * static_cast<int64_t>(row), row,
                        l.q.data() + i * row);
            std::copy_n(recorders[li]->recorded_out().data() + at * static_cast<int64_t>(row), row,
                        l.out.data() + i * row);
            const size_t n_vis = visible_spans(r.spans, p, r.tail);
            for (int h = 0; h < l.n_head; ++h) {
                const int g = h / (l.n_head / l.n_kv_head);
                head_probabilities(l.q.data() + i * row + static_cast<size_t>(h) * l.head_dim,
                                   l.k.data(), l.n_kv_head, l.head_dim, g, l.scale, p, prob);
                float* mass = l.span_mass.data() + (i * l.n_head + h) * n_spans;
                for (size_t s = 0; s < n_vis; ++s) {
                    double m = 0;
                    for (int64_t j = r.spans[s].begin; j < r.spans[s].end; ++j)
                        m += prob[static_cast<size_t>(j)];
                    mass[s] = static_cast<float>(m);
                }
                // The recorded output against Σ_j P(j) v_j.
                const float* o = l.out.data() + i * row + static_cast<size_t>(h) * l.head_dim;
                y.assign(static_cast<size_t>(l.head_dim), 0.0);
                for (int32_t j = 0; j <= p; ++j) {
                    const float* vj = l.v.data() + static_cast<size_t>(j) * kv_stride +
                                      static_cast<size_t>(g) * l.head_dim;
                    for (int c = 0; c < l.head_dim; ++c)
                        y[static_cast<size_t>(c)] += prob[static_cast<size_t>(j)] * vj[c];
                }
                for (int c = 0; c < l.head_dim; ++c)
                    out.out_check =
                        std::max(out.out_check, std::abs(y[static_cast<size_t>(c)] - o[c]));
            }
        }
    }
    if (!(out.out_check <= kZoomOutCheckLimit))
        throw ZoomOutCheckError(
            "the recorded attention outputs differ from attention recomputed in double from the "
            "recorded queries, keys and values by " +
            std::to_string(out.out_check) + " (at most " + std::to_string(kZoomOutCheckLimit) +
            " is accepted): not recorded");
    return out;
}

ZoomResume zoom_resume(const std::string& path, const std::string& source,
                       const std::vector<int32_t>& tokens, const std::string& model_fingerprint,
                       const std::string& settings_key) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
        return ZoomResume::Record;
    const ZoomRecord r = load_zoom_record(path); // ZoomRecordError names the file
    auto refuse = [&](const std::string& why) {
        throw ZoomRecordError(path + ": " + why +
                              "; remove the file or record into another directory");
    };
    if (r.source != source)
        refuse("a recording of " + r.source + ", not of " + source);
    if (r.model_fingerprint != model_fingerprint)
        refuse("recorded with another model (fingerprint " + r.model_fingerprint + ", this one " +
               model_fingerprint + ")");
    if (r.settings != settings_key)
        refuse("recorded with other settings (" + r.settings + "; now " + settings_key + ")");
    if (r.tokens != tokens)
        refuse("the document's tokens differ from the recorded ones (the file changed since)");
    return ZoomResume::Skip;
}

} // namespace spanscope
