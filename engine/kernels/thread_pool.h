// A fixed pool of worker threads for data-parallel loops (the caller takes part). Between jobs a
// worker spins for a short while (kSpin) before it sleeps, and so does the caller waiting for the
// workers' shares: a decode step runs a few hundred short loops, and waking a sleeping thread
// costs tens of microseconds each time. A pool with more threads than the machine has cores does
// not spin (the spinners would take the cores from the threads doing the work).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace spanscope {

class ThreadPool {
public:
    /// n_threads <= 0 means std::thread::hardware_concurrency().
    explicit ThreadPool(int n_threads = 0);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    /// Split [0, n) into contiguous ranges, one per thread, and run fn(begin, end, thread_index)
    /// on each; returns when all are done. The first exception thrown by fn is rethrown here.
    /// Not reentrant: fn must not call parallel_for on the same pool.
    void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn);

private:
    void worker(int index);
    /// How long an idle worker, or the caller waiting for the workers, spins before sleeping.
    static constexpr std::chrono::microseconds kSpin{300};
    std::chrono::microseconds spin_{0}; ///< kSpin, or 0 when oversubscribed
    int n_threads_;
    std::vector<std::thread> threads_;
    std::mutex mutex_;
    std::condition_variable start_cv_, done_cv_;
    const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
    int64_t job_n_ = 0;
    std::atomic<uint64_t> generation_{0}; ///< written under mutex_, read by spinning workers
    std::atomic<int> pending_{0};         ///< workers still running the current job
    std::atomic<bool> stop_{false};
    std::exception_ptr error_;
};

} // namespace spanscope
