// The main window: layout, menus, keyboard shortcuts, drag and drop, the worker threads.
// What happens when the user acts or a worker reports is in main_window_actions.cpp.
#include "ui/main_window.h"

#include "ui/chat_delegate.h"
#include "ui/document_view.h"
#include "ui/engine_worker.h"
#include "ui/store_worker.h"
#include "ui/zoom_inspector.h"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QCloseEvent>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QFile>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QKeySequence>
#include <QLabel>
#include <QListView>
#include <QMenuBar>
#include <QMimeData>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollBar>
#include <QShortcut>
#include <QSplitter>
#include <QStatusBar>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>

#include <unistd.h>

// The icon is compiled into the static library; its initialiser must be called by name.
static void init_resources() {
    Q_INIT_RESOURCE(resources);
}

namespace spanscope::gui {

MainWindow::MainWindow(AppSettings settings, bool persist_settings, QWidget* parent)
    : QMainWindow(parent), settings_(std::move(settings)), persist_(persist_settings) {
    register_gui_types();
    init_resources();
    setWindowIcon(QIcon(QStringLiteral(":/icons/spanscope.svg")));
    setAcceptDrops(true);
    build_ui();
    build_menus();
    build_zoom_ui();
    update_policy_label();

    engine_ = new EngineWorker;
    engine_->moveToThread(&engine_thread_);
    store_ = new StoreWorker;
    store_->moveToThread(&store_thread_);
    connect(&engine_thread_, &QThread::finished, engine_, &QObject::deleteLater);
    connect(&store_thread_, &QThread::finished, store_, &QObject::deleteLater);
    connect(&engine_thread_, &QThread::started, engine_, &EngineWorker::init_thread);
    engine_thread_.setObjectName(QStringLiteral("engine"));
    store_thread_.setObjectName(QStringLiteral("store"));
    connect_workers();
    engine_thread_.start();
    store_thread_.start();

    QMetaObject::invokeMethod(
        engine_,
        [e = engine_, p = settings_.effective_model(), t = settings_.threads, b = settings_.backend,
         a = settings_.model_failure_advice()] { e->load_model(p, t, b, a); });
    update_title();
    update_actions();
    resize(1280, 800);
    if (!settings_.upgrade_note.isEmpty()) {
        show_banner(settings_.upgrade_note, false);
        if (persist_)
            settings_.save(); // said once: saved, they carry today's version
    }
}

MainWindow::~MainWindow() {
    // Whatever runs stops within a layer's time; committed chunks stay.
    engine_->request_stop(~quint64{0});
    engine_->request_cancel_ingest(~quint64{0});
    engine_thread_.quit();
    // Let the store finish what is queued for it (the document order just saved) before its
    // event loop ends: quit() drops events not yet delivered.
    QMetaObject::invokeMethod(
        store_, [] {}, Qt::BlockingQueuedConnection);
    store_thread_.quit();
    engine_thread_.wait();
    store_thread_.wait();
}

void MainWindow::build_ui() {
    auto* central = new QWidget;
    auto* outer = new QVBoxLayout(central);
    outer->setContentsMargins(4, 4, 4, 4);

    banner_box_ = new QWidget;
    banner_box_->setObjectName(QStringLiteral("bannerBox"));
    auto* bl = new QHBoxLayout(banner_box_);
    bl->setContentsMargins(8, 4, 4, 4);
    banner_ = new QLabel;
    banner_->setObjectName(QStringLiteral("messageBanner"));
    banner_->setWordWrap(true);
    banner_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    banner_close_ = new QToolButton;
    banner_close_->setText(QStringLiteral("✕"));
    banner_close_->setToolTip(tr("Dismiss"));
    connect(banner_close_, &QToolButton::clicked, banner_box_, &QWidget::hide);
    bl->addWidget(banner_, 1);
    bl->addWidget(banner_close_);
    banner_box_->hide();
    outer->addWidget(banner_box_);

    auto* split = new QSplitter(Qt::Horizontal);
    outer->addWidget(split, 1);

    // Left: documents and chats.
    auto* left = new QWidget;
    auto* ll = new QVBoxLayout(left);
    ll->setContentsMargins(0, 0, 0, 0);
    ll->addWidget(new QLabel(tr("<b>Documents</b> (checked: asked about)")));
    document_list_ = new QListView;
    document_list_->setObjectName(QStringLiteral("documentList"));
    document_list_->setModel(&documents_);
    document_list_->setAlternatingRowColors(true);
    document_list_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    ll->addWidget(document_list_, 3);
    auto* add = new QPushButton(tr("Add documents…"));
    add->setObjectName(QStringLiteral("addDocumentsButton"));
    connect(add, &QPushButton::clicked, this, &MainWindow::choose_and_add_documents);
    ll->addWidget(add);
    ll->addWidget(new QLabel(tr("<b>Chats</b>")));
    chat_list_ = new QListView;
    chat_list_->setObjectName(QStringLiteral("chatList"));
    chat_list_->setModel(&chats_);
    chat_list_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    ll->addWidget(chat_list_, 2);
    auto* nc = new QPushButton(tr("New chat"));
    nc->setObjectName(QStringLiteral("newChatButton"));
    connect(nc, &QPushButton::clicked, this, &MainWindow::new_chat);
    ll->addWidget(nc);
    split->addWidget(left);

    // Middle: the document's text.
    auto* mid = new QWidget;
    auto* ml = new QVBoxLayout(mid);
    ml->setContentsMargins(0, 0, 0, 0);
    document_title_ = new QLabel(tr("<b>No document</b>"));
    auto* title_row = new QHBoxLayout;
    title_row->addWidget(document_title_);
    title_row->addStretch(1);
    span_status_ = new QLabel;
    span_status_->setObjectName(QStringLiteral("spanStatus"));
    title_row->addWidget(span_status_);
    ml->addLayout(title_row);
    zoom_bar_ = new QWidget;
    zoom_bar_->setObjectName(QStringLiteral("zoomBar"));
    auto* zl = new QHBoxLayout(zoom_bar_);
    zl->setContentsMargins(0, 0, 0, 0);
    zoom_label_ = new QLabel;
    zoom_label_->setObjectName(QStringLiteral("zoomLabel"));
    zoom_label_->setWordWrap(true);
    zl->addWidget(zoom_label_, 1);
    whole_button_ = new QToolButton;
    whole_button_->setObjectName(QStringLiteral("wholeAnswerButton"));
    whole_button_->setText(tr("Whole answer"));
    whole_button_->setToolTip(
        tr("Show how often each span was zoomed into over the whole answer (a heat map)"));
    whole_button_->setCheckable(true);
    connect(whole_button_, &QToolButton::toggled, this, &MainWindow::set_whole_answer);
    zl->addWidget(whole_button_);
    zoom_bar_->hide();
    ml->addWidget(zoom_bar_);
    document_view_ = new DocumentView;
    document_view_->setObjectName(QStringLiteral("documentView"));
    document_view_->setAcceptDrops(false);
    document_view_->setPlaceholderText(tr(
        "Drop documents here (text, Markdown, HTML, PDF, also scanned, Word, ODT, EPUB, gzip) or "
        "use File ▸ Add Documents. "
        "Select a document to read it."));
    ml->addWidget(document_view_, 1);
    split->addWidget(mid);

    // Right: the conversation.
    auto* right = new QWidget;
    auto* rl = new QVBoxLayout(right);
    rl->setContentsMargins(0, 0, 0, 0);
    rl->addWidget(new QLabel(tr("<b>Chat</b>")));
    conversation_ = new QListView;
    conversation_->setObjectName(QStringLiteral("conversation"));
    conversation_->setModel(&chat_);
    chat_delegate_ = new ChatDelegate(conversation_);
    conversation_->setItemDelegate(chat_delegate_);
    conversation_->setResizeMode(QListView::Adjust);
    conversation_->setVerticalScrollMode(QAbstractItemView::ScrollPerPixel);
    conversation_->setSelectionMode(QAbstractItemView::ExtendedSelection);
    conversation_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    rl->addWidget(conversation_, 1);
    input_ = new QPlainTextEdit;
    input_->setObjectName(QStringLiteral("questionInput"));
    input_->setPlaceholderText(tr("Ask about the checked documents (Ctrl+Enter sends, Esc stops)"));
    input_->setMaximumHeight(90);
    // Files dropped on the question box (or the document view) are added, not pasted as URLs.
    input_->installEventFilter(this);
    input_->viewport()->installEventFilter(this);
    rl->addWidget(input_);
    auto* buttons = new QHBoxLayout;
    buttons->addStretch(1);
    stop_ = new QPushButton(tr("Stop"));
    stop_->setObjectName(QStringLiteral("stopButton"));
    send_ = new QPushButton(tr("Send"));
    send_->setObjectName(QStringLiteral("sendButton"));
    send_->setDefault(true);
    buttons->addWidget(stop_);
    buttons->addWidget(send_);
    rl->addLayout(buttons);
    connect(send_, &QPushButton::clicked, this, &MainWindow::on_send);
    connect(stop_, &QPushButton::clicked, this, &MainWindow::stop_answer);
    split->addWidget(right);
    split->setStretchFactor(0, 2);
    split->setStretchFactor(1, 4);
    split->setStretchFactor(2, 3);
    split->setSizes({260, 560, 460});
    setCentralWidget(central);

    model_label_ = new QLabel(tr("loading the model…"));
    model_label_->setObjectName(QStringLiteral("modelLabel"));
    cache_label_ = new QLabel;
    cache_label_->setObjectName(QStringLiteral("cacheLabel"));
    memory_label_ = new QLabel;
    memory_label_->setObjectName(QStringLiteral("memoryLabel"));
    stats_label_ = new QLabel;
    stats_label_->setObjectName(QStringLiteral("statsLabel"));
    ingest_bar_ = new QProgressBar;
    ingest_bar_->setObjectName(QStringLiteral("ingestProgress"));
    ingest_bar_->setMinimumWidth(340);
    ingest_bar_->setTextVisible(true);
    cancel_ingest_ = new QPushButton(tr("Cancel"));
    cancel_ingest_->setObjectName(QStringLiteral("cancelIngestButton"));
    connect(cancel_ingest_, &QPushButton::clicked, this, &MainWindow::cancel_ingest);
    statusBar()->addWidget(model_label_);
    statusBar()->addWidget(cache_label_);
    statusBar()->addWidget(memory_label_);
    policy_label_ = new QLabel;
    policy_label_->setObjectName(QStringLiteral("policyLabel"));
    statusBar()->addWidget(policy_label_);
    // The last answer's statistics take the room left and are cut at the right when the
    // window is narrow (the whole line is in the tooltip), rather than asking for their full
    // width (a new user's offscreen demo showed them cut to one letter).
    stats_label_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    statusBar()->addWidget(stats_label_, 1);
    message_label_ = new QLabel;
    message_label_->setObjectName(QStringLiteral("messageLabel"));
    statusBar()->addWidget(message_label_);
    statusBar()->addPermanentWidget(ingest_bar_);
    statusBar()->addPermanentWidget(cancel_ingest_);
    ingest_bar_->hide();
    cancel_ingest_->hide();
    auto* memory_timer = new QTimer(this);
    connect(memory_timer, &QTimer::timeout, this, &MainWindow::update_memory_label);
    memory_timer->start(2000);
    update_memory_label();

    connect(document_list_->selectionModel(), &QItemSelectionModel::currentChanged, this,
            &MainWindow::on_document_selected);
    connect(chat_list_->selectionModel(), &QItemSelectionModel::currentChanged, this,
            &MainWindow::on_chat_selected);
    // A streamed piece can make the answer taller: the view lays it out again.
    connect(&chat_, &QAbstractItemModel::dataChanged, this, [this](const QModelIndex& first) {
        emit chat_delegate_->sizeHintChanged(first);
        conversation_->scrollToBottom();
    });
    connect(&chat_, &QAbstractItemModel::rowsInserted, conversation_, &QListView::scrollToBottom);
    // An answer selected shows its zoom; a token clicked, that token's.
    conversation_->viewport()->installEventFilter(this);
    connect(conversation_->selectionModel(), &QItemSelectionModel::currentChanged, this,
            [this](const QModelIndex& i) {
                const qint64 id = i.data(ChatModel::MessageIdRole).toLongLong();
                if (i.isValid() && !i.data(ChatModel::FromUserRole).toBool() && id > 0)
                    show_answer_zoom(id);
            });
}

void MainWindow::build_menus() {
    auto* file = menuBar()->addMenu(tr("&File"));
    auto* a = file->addAction(tr("&New Project…"), this, [this] { choose_and_open_project(true); });
    a->setShortcut(QKeySequence::New);
    a = file->addAction(tr("&Open Project…"), this, [this] { choose_and_open_project(false); });
    a->setShortcut(QKeySequence::Open);
    recent_menu_ = file->addMenu(tr("Open &Recent"));
    rebuild_recent_menu();
    close_action_ = file->addAction(tr("&Close Project"), this, &MainWindow::close_project);
    close_action_->setShortcut(QKeySequence::Close);
    file->addSeparator();
    add_action_ =
        file->addAction(tr("&Add Documents…"), this, &MainWindow::choose_and_add_documents);
    add_action_->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_A));
    remove_action_ =
        file->addAction(tr("&Remove Document"), this, &MainWindow::remove_selected_document);
    remove_action_->setShortcut(QKeySequence::Delete);
    remove_action_->setShortcutContext(Qt::WidgetWithChildrenShortcut);
    document_list_->addAction(remove_action_);
    setup_document_context(file);
    document_list_->setContextMenuPolicy(Qt::ActionsContextMenu);
    file->addSeparator();
    a = file->addAction(tr("&Settings…"), this, &MainWindow::show_settings);
    a->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Comma)); // Preferences is macOS-only
    file->addSeparator();
    a = file->addAction(tr("&Quit"), this, &QWidget::close);
    a->setShortcut(QKeySequence::Quit);

    auto* chat = menuBar()->addMenu(tr("&Chat"));
    send_action_ = chat->addAction(tr("&Send"), this, &MainWindow::on_send);
    send_action_->setShortcuts(
        {QKeySequence(Qt::CTRL | Qt::Key_Return), QKeySequence(Qt::CTRL | Qt::Key_Enter)});
    stop_action_ = chat->addAction(tr("S&top"), this, [this] {
        if (answering_)
            stop_answer();
        else if (ingesting())
            cancel_ingest();
    });
    stop_action_->setShortcut(QKeySequence(Qt::Key_Escape));
    chat->addSeparator();
    a = chat->addAction(tr("&New Chat"), this, &MainWindow::new_chat);
    a->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_T));
    chat_actions_[0] = chat->addAction(tr("&Rename Chat…"), this, &MainWindow::rename_current_chat);
    chat_actions_[0]->setShortcut(QKeySequence(Qt::Key_F2));
    chat_actions_[1] = chat->addAction(tr("&Delete Chat"), this, &MainWindow::delete_current_chat);
    chat_actions_[2] = chat->addAction(tr("&Copy Chat"), this, &MainWindow::copy_chat);
    chat_actions_[2]->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_C));
    chat_actions_[3] =
        chat->addAction(tr("&Export Chat as Markdown…"), this, &MainWindow::export_chat);
    chat_actions_[3]->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
    // Right-click menus: the chat list offers what the Chat menu does; a message can be copied.
    chat_list_->setContextMenuPolicy(Qt::ActionsContextMenu);
    chat_list_->addActions({chat_actions_[0], chat_actions_[1], chat_actions_[3]});
    auto* copy_message = new QAction(tr("&Copy Message"), conversation_);
    copy_message->setShortcut(QKeySequence::Copy);
    copy_message->setShortcutContext(Qt::WidgetShortcut);
    connect(copy_message, &QAction::triggered, this, [this] {
        auto rows = conversation_->selectionModel()->selectedRows();
        std::sort(rows.begin(), rows.end());
        QStringList texts;
        for (const auto& i : rows)
            texts << i.data().toString();
        if (!texts.isEmpty())
            QApplication::clipboard()->setText(texts.join(QStringLiteral("\n\n")));
    });
    conversation_->setContextMenuPolicy(Qt::ActionsContextMenu);
    conversation_->addActions({copy_message, chat_actions_[2]});
}

void MainWindow::closeEvent(QCloseEvent* event) {
    // What runs stops within a layer's time; the destructor then waits for the threads.
    engine_->request_stop(~quint64{0});
    engine_->request_cancel_ingest(~quint64{0});
    if (persist_)
        settings_.save();
    event->accept();
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
    if (watched == conversation_->viewport()) {
        if (event->type() == QEvent::MouseButtonRelease &&
            static_cast<QMouseEvent*>(event)->button() == Qt::LeftButton)
            on_conversation_click(static_cast<QMouseEvent*>(event)->position().toPoint());
        return QMainWindow::eventFilter(watched, event);
    }
    if (event->type() == QEvent::DragEnter || event->type() == QEvent::DragMove) {
        auto* e = static_cast<QDragMoveEvent*>(event);
        if (e->mimeData()->hasUrls()) {
            e->acceptProposedAction();
            return true;
        }
    } else if (event->type() == QEvent::Drop) {
        auto* e = static_cast<QDropEvent*>(event);
        if (e->mimeData()->hasUrls()) {
            dropEvent(e);
            return true;
        }
    }
    return QMainWindow::eventFilter(watched, event);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
    if (event->mimeData()->hasUrls())
        for (const auto& u : event->mimeData()->urls())
            if (u.isLocalFile()) {
                event->acceptProposedAction();
                return;
            }
}

void MainWindow::dropEvent(QDropEvent* event) {
    QStringList files;
    for (const auto& u : event->mimeData()->urls())
        if (u.isLocalFile() && QFileInfo(u.toLocalFile()).isFile())
            files << u.toLocalFile();
    if (files.isEmpty())
        return;
    event->acceptProposedAction();
    add_documents(files);
}

void MainWindow::show_banner(const QString& text, bool error) {
    banner_->setText(text);
    banner_box_->setStyleSheet(error ? QStringLiteral("#bannerBox { background: #fbe3e3; }")
                                     : QStringLiteral("#bannerBox { background: #e6f0fb; }"));
    banner_box_->show();
}

void MainWindow::show_status(const QString& text, int ms) {
    // A label of its own: QStatusBar::showMessage would hide the model, memory and statistics.
    message_label_->setText(text);
    const quint64 n = ++status_serial_;
    QTimer::singleShot(ms, this, [this, n] {
        if (n == status_serial_)
            message_label_->clear();
    });
}

void MainWindow::update_memory_label() {
    // Resident pages of this process (proc(5), /proc/[pid]/statm, second field).
    QFile statm(QStringLiteral("/proc/self/statm"));
    qint64 resident = 0;
    if (statm.open(QIODevice::ReadOnly))
        resident = statm.readAll().split(' ').value(1).toLongLong() * sysconf(_SC_PAGESIZE);
    const QLocale l;
    QString text = tr("memory in use %1").arg(l.formattedDataSize(resident));
    if (last_kv_bytes_ > 0)
        text += tr(" · KV cache %1").arg(l.formattedDataSize(last_kv_bytes_));
    memory_label_->setText(text);
}

void MainWindow::update_policy_label() {
    const auto& m = settings_.memory;
    // The router as chosen; an answer's statistics name the one used (automatic: trained when
    // the model has a parameter file).
    policy_label_->setText(!m.sekv()            ? tr("policy full")
                           : m.router.isEmpty() ? tr("policy sekv")
                                                : tr("policy sekv, %1 router").arg(m.router));
    policy_label_->setToolTip(
        m.sekv()
            ? tr("Memory policy (Settings): sekv on the layers it serves — the global-attention "
                 "layers with full-head RoPE of a model that also has sliding-window or "
                 "recurrent ones (Gemma 3, the hybrids; none where no layer rotates its whole "
                 "head), the later half of a model whose layers are all global (the Llama "
                 "family; its first half holds every row) —, their fast tier at most %1 % of full, "
                 "queries zooming into %2 % "
                 "of the spans (threshold set %3; router: %4%5). Each answer's statistics give "
                 "the whole cache against full.")
                  .arg(
                      trimmed_number(100 * m.budget, 1), trimmed_number(100 * m.expand_rate, 3),
                      m.tau_per_query ? tr("on each query") : tr("on the question"),
                      m.router.isEmpty() ? tr("automatic") : m.router,
                      m.rerank_in_effect(settings_.backend) > 0
                          ? tr("; two-stage routing, %1 candidates per expanded span").arg(m.rerank)
                          : QString())
            : tr("Memory policy (Settings): full, every token's keys and values"));
}

QString MainWindow::cache_text() const {
    return cache_label_->text();
}

QString MainWindow::banner_text() const {
    return banner_box_->isHidden() ? QString() : banner_->text();
}

void MainWindow::update_title() {
    setWindowTitle(
        project_path_.isEmpty()
            ? QStringLiteral("Spanscope")
            : QStringLiteral("%1 — Spanscope").arg(QFileInfo(project_path_).completeBaseName()));
}

void MainWindow::update_actions() {
    const bool open = !project_path_.isEmpty();
    close_action_->setEnabled(open);
    remove_action_->setEnabled(open);
    move_up_action_->setEnabled(open);
    move_down_action_->setEnabled(open);
    send_->setEnabled(!answering_);
    stop_->setEnabled(answering_);
    const bool has_chat = chat_.chat_id() > 0;
    for (auto* a : chat_actions_)
        a->setEnabled(has_chat && !answering_);
}

} // namespace spanscope::gui
