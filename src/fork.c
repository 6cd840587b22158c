/* SPDX-License-Identifier: MIT */
/*
 * fork.c - telling the process that opened a handle from its forked children.
 *
 * A child of fork() inherits the parent's handles: the mapping, the region
 * file, the registration socket, and with them the parent's client index.
 * Used there, a handle would acquire as the parent (a supervisor reaping
 * the parent would free the child's locks, and the reverse), and its
 * fl_close would shut the shared socket down, so the supervisor would reap
 * the living parent.  Every entry point therefore checks that the calling
 * process is the one that opened the handle (fl__handle_check), and
 * fl_close in a child only unmaps its own copy.
 *
 * HOW: one word per process, on an anonymous page marked MADV_WIPEONFORK.
 * The kernel gives a child that page zeroed, whatever way it forked
 * (fork(), clone(), vfork()-then-not-exec, Python's os.fork()), with no
 * pthread_atfork handler to be skipped.  The first handle a process opens
 * stores a nonzero incarnation number there; every handle keeps a copy.  A
 * handle whose copy differs from the word was opened by another process.
 * The check is one load of a word that never changes in this process: no
 * system call (getpid() is one) on the fast path.
 *
 * A pthread_atfork child handler zeroes the word too.  Kernels before 4.14
 * lack MADV_WIPEONFORK, and some environments accept the advice and ignore
 * it (qemu-user, which runs the aarch64 tests, returns success for every
 * madvise and does nothing): there the handler is what detects a fork()
 * child (children made by a raw clone system call are then not detected).
 * Where the page is wiped, the handler stores the zero already there.
 */
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core.h"

#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#endif

static _Atomic uint64_t *fl__incarnation_word;
static _Atomic uint64_t fl__incarnations; /* not wiped: a child counts on from its parent */
static uint64_t fl__fallback_word;        /* if the page cannot be had */
static pthread_once_t fl__fork_once = PTHREAD_ONCE_INIT;

static void fl__after_fork_in_child(void)
{
    /* relaxed: the child is single-threaded here */
    atomic_store_explicit(fl__incarnation_word, 0, memory_order_relaxed);
}

static void fl__fork_init(void)
{
    long page = sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, page > 0 ? (size_t)page : 4096, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        fl__incarnation_word = (_Atomic uint64_t *)&fl__fallback_word;
        pthread_atfork(NULL, NULL, fl__after_fork_in_child);
        return;
    }
    fl__incarnation_word = p;
    /* Its failure is not fatal: the handler below covers fork(). */
    (void)madvise(p, page > 0 ? (size_t)page : 4096, MADV_WIPEONFORK);
    pthread_atfork(NULL, NULL, fl__after_fork_in_child);
}

void fl__handle_bind_process(fl_region *r)
{
    pthread_once(&fl__fork_once, fl__fork_init);
    _Atomic uint64_t *w = fl__incarnation_word;
    /* relaxed: the word is per process; only this process's threads race
     * to set it, and the CAS picks one value for all of them */
    uint64_t v = atomic_load_explicit(w, memory_order_relaxed);
    if (v == 0) {
        /* A child's counter starts where its parent's was, so the new
         * number differs from every incarnation an inherited handle holds. */
        uint64_t mine = atomic_fetch_add_explicit(&fl__incarnations, 1, memory_order_relaxed) + 1;
        if (atomic_compare_exchange_strong_explicit(w, &v, mine, memory_order_relaxed,
                                                    memory_order_relaxed))
            v = mine;
    }
    r->incarnation_word = w;
    r->incarnation = v;
}

int fl__handle_forked(const fl_region *r, const char *fn)
{
    return fl__fail(-ECHILD,
                    "%s: the handle of region %s was opened by another process (this process "
                    "is a fork of it): open the region again in this process",
                    fn, r->path);
}
