// `spanscope --screenshots DIR`: drive the main window through its typical states offscreen
// (adding a document with its progress bar, the document read, an answer streamed) and save
// each as a PNG.
#pragma once

#include "ui/app_settings.h"

#include <QString>
#include <QStringList>

namespace spanscope::gui {

/// Writes DIR/main-window-ingest.png, main-window-document.png, main-window-answer.png (with
/// its sources), answer-sources.png (the top source clicked: its passage highlighted),
/// document-zoom.png (the spans one answer token zoomed into) and inspector.png, with the sekv
/// memory policy (its default settings).
/// The project lives in a temporary directory; settings are read, never written. Returns 0, or 1
/// with a message on stderr (no model, a document that fails, a state not reached in time).
int render_screenshots(const QString& dir, const QStringList& files, const QString& question,
                       const AppSettings& settings);

} // namespace spanscope::gui
