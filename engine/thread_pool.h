// A fixed pool of worker threads for data-parallel loops (the caller takes part).
#pragma once

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
    int n_threads_;
    std::vector<std::thread> threads_;
    std::mutex mutex_;
    std::condition_variable start_cv_, done_cv_;
    const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
    int64_t job_n_ = 0;
    uint64_t generation_ = 0;
    int pending_ = 0;
    bool stop_ = false;
    std::exception_ptr error_;
};

} // namespace spanscope
