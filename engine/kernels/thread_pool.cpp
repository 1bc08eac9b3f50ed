#include "engine/kernels/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace spanscope {

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads <= 0)
        n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    n_threads_ = n_threads;
    const unsigned cores = std::thread::hardware_concurrency();
    spin_ = cores == 0 || static_cast<unsigned>(n_threads_) <= cores ? kSpin
                                                                     : std::chrono::microseconds{0};
    for (int i = 1; i < n_threads_; ++i)
        threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    start_cv_.notify_all();
    for (auto& t : threads_)
        t.join();
}

namespace {
void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
}

/// Spins until done() or `limit` has passed; returns done().
template <class Done> bool spin_until(Done done, std::chrono::microseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    for (int i = 0;; ++i) {
        if (done())
            return true;
        cpu_relax();
        if ((i & 63) == 63 && std::chrono::steady_clock::now() >= end)
            return done();
    }
}

void range_of(int64_t n, int parts, int index, int64_t& begin, int64_t& end) {
    const int64_t chunk = n / parts, rest = n % parts;
    begin = index * chunk + std::min<int64_t>(index, rest);
    end = begin + chunk + (index < rest ? 1 : 0);
}
} // namespace

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
    if (n <= 0)
        return;
    if (n_threads_ == 1 || n == 1) {
        fn(0, n, 0);
        return;
    }
    {
        std::lock_guard lock(mutex_);
        job_ = &fn;
        job_n_ = n;
        pending_.store(n_threads_ - 1);
        error_ = nullptr;
        generation_.fetch_add(1);
    }
    start_cv_.notify_all();
    std::exception_ptr mine;
    try {
        int64_t b, e;
        range_of(n, n_threads_, 0, b, e);
        if (b < e)
            fn(b, e, 0);
    } catch (...) {
        mine = std::current_exception();
    }
    spin_until([this] { return pending_.load(std::memory_order_acquire) == 0; }, spin_);
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [this] { return pending_.load() == 0; });
    job_ = nullptr;
    if (mine)
        std::rethrow_exception(mine);
    if (error_)
        std::rethrow_exception(error_);
}

void ThreadPool::worker(int index) {
    uint64_t seen = 0;
    for (;;) {
        const std::function<void(int64_t, int64_t, int)>* job;
        int64_t n;
        spin_until(
            [&] { return stop_.load() || generation_.load(std::memory_order_acquire) != seen; },
            spin_);
        {
            std::unique_lock lock(mutex_);
            start_cv_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
            if (stop_)
                return;
            seen = generation_.load();
            job = job_;
            n = job_n_;
        }
        try {
            int64_t b, e;
            range_of(n, n_threads_, index, b, e);
            if (b < e)
                (*job)(b, e, index);
        } catch (...) {
            std::lock_guard lock(mutex_);
            if (!error_)
                error_ = std::current_exception();
        }
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            std::lock_guard lock(mutex_);
            done_cv_.notify_one();
        }
    }
}

} // namespace spanscope
