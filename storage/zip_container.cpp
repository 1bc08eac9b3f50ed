#include "storage/zip_container.h"

#include "engine/text/text_input.h" // DocumentError

#include <zip.h>

#include <algorithm>

namespace spanscope {

namespace {

constexpr zip_int64_t kMaxEntries = 100000;

std::string libzip_message(int code) {
    zip_error_t error;
    zip_error_init_with_code(&error, code);
    std::string msg = zip_error_strerror(&error);
    zip_error_fini(&error);
    return msg;
}

} // namespace

bool is_zip(const std::string& bytes) {
    return bytes.starts_with(std::string_view("PK\x03\x04", 4)) ||
           bytes.starts_with(std::string_view("PK\x05\x06", 4));
}

ZipContainer::ZipContainer(const std::string& path, const std::string& bytes, size_t max_bytes)
    : path_(path), max_bytes_(max_bytes) {
    zip_error_t error;
    zip_error_init(&error);
    zip_source_t* source = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error);
    if (!source) {
        const std::string msg = zip_error_strerror(&error);
        zip_error_fini(&error);
        throw DocumentError(path + ": cannot be read as a ZIP container (libzip: " + msg + ")");
    }
    // CHECKCONS: the central directory must agree with the local headers, as a damaged or
    // cut-off archive does not.
    archive_ = zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &error);
    if (!archive_) {
        zip_source_free(source);
        const int code = zip_error_code_zip(&error);
        const std::string msg = zip_error_strerror(&error);
        zip_error_fini(&error);
        if (code == ZIP_ER_NOZIP || code == ZIP_ER_INCONS || code == ZIP_ER_EOF ||
            code == ZIP_ER_READ || code == ZIP_ER_SEEK || code == ZIP_ER_CRC)
            throw DocumentError(path + ": is a damaged or truncated ZIP container (libzip: " + msg +
                                ")");
        throw DocumentError(path + ": cannot be read as a ZIP container (libzip: " + msg + ")");
    }
    zip_error_fini(&error);

    const zip_int64_t n = zip_get_num_entries(archive_, 0);
    if (n < 0 || n > kMaxEntries) {
        zip_discard(archive_);
        throw DocumentError(path + ": has " + std::to_string(n) + " entries, more than the " +
                            std::to_string(kMaxEntries) + " a document may have");
    }
    uint64_t declared = 0;
    for (zip_int64_t i = 0; i < n; ++i) {
        zip_stat_t st;
        zip_stat_init(&st);
        if (zip_stat_index(archive_, static_cast<zip_uint64_t>(i), 0, &st) != 0 || !st.name) {
            zip_discard(archive_);
            throw DocumentError(path + ": is a damaged ZIP container (entry " + std::to_string(i) +
                                " cannot be read)");
        }
        names_.emplace_back(st.name);
        // Compared before adding: a size near 2^64 must not wrap the sum.
        if ((st.valid & ZIP_STAT_SIZE) && st.size > max_bytes - declared) {
            zip_discard(archive_);
            throw DocumentError(path + ": declares more than " + std::to_string(max_bytes) +
                                " bytes once uncompressed, more than a document may have (a ZIP "
                                "bomb?)");
        }
        if (st.valid & ZIP_STAT_SIZE)
            declared += st.size;
    }
}

ZipContainer::~ZipContainer() {
    if (archive_)
        zip_discard(archive_);
}

bool ZipContainer::has(const std::string& name) const {
    return std::find(names_.begin(), names_.end(), name) != names_.end();
}

std::optional<std::string> ZipContainer::read(const std::string& name) {
    const zip_int64_t index = zip_name_locate(archive_, name.c_str(), ZIP_FL_ENC_GUESS);
    if (index < 0)
        return std::nullopt;
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(archive_, static_cast<zip_uint64_t>(index), 0, &st) != 0)
        throw DocumentError(path_ + ": is a damaged ZIP container (" + name + " cannot be read)");
    if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE)
        throw DocumentError(path_ + ": is encrypted with a password (" + name +
                            "); open it in its program, remove the password and add it again");

    zip_file_t* file = zip_fopen_index(archive_, static_cast<zip_uint64_t>(index), 0);
    if (!file) {
        const int code = zip_error_code_zip(zip_get_error(archive_));
        if (code == ZIP_ER_NOPASSWD || code == ZIP_ER_WRONGPASSWD)
            throw DocumentError(path_ + ": is encrypted with a password (" + name + ")");
        throw DocumentError(path_ + ": is a damaged ZIP container (" + name +
                            ": libzip: " + libzip_message(code) + ")");
    }
    struct Close {
        zip_file_t* f;
        ~Close() { zip_fclose(f); }
    } close{file};

    // Read what the data holds, not what the header declares, and stop one byte past the
    // budget: a lying header cannot make this inflate more.
    std::string out;
    char buffer[1 << 16];
    for (;;) {
        const zip_int64_t got = zip_fread(file, buffer, sizeof buffer);
        if (got < 0)
            throw DocumentError(path_ + ": is a damaged ZIP container (" + name + ": " +
                                zip_file_strerror(file) + ")");
        if (got == 0)
            break;
        bytes_read_ += static_cast<size_t>(got);
        if (bytes_read_ > max_bytes_)
            throw DocumentError(path_ + ": inflates to more than the " +
                                std::to_string(max_bytes_) +
                                " bytes a document may have (a ZIP bomb?)");
        out.append(buffer, static_cast<size_t>(got));
    }
    return out;
}

std::string ZipContainer::read_required(const std::string& name, const std::string& what) {
    auto bytes = read(name);
    if (!bytes)
        throw DocumentError(path_ + ": is not " + what + " (the ZIP container has no " + name +
                            ")");
    return std::move(*bytes);
}

} // namespace spanscope
