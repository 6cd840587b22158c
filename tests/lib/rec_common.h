/* SPDX-License-Identifier: MIT */
/*
 * rec_common.h - what the record tests share: self-checking payloads, region
 * set-up, children that report over pipes, and a profile of one whole
 * fl_commit() under ptrace (tests/lib/tracer.h drives the stepping).
 *
 * Children never use cmocka asserts (a failing assert would longjmp inside a
 * forked copy of the runner): they report over their pipe and exit with a
 * status; the parent asserts.
 */
#ifndef FL_REC_COMMON_H
#define FL_REC_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fencelock.h"
#include "harness.h"
#include "tracer.h"

/* ---- self-checking payloads ----------------------------------------------
 * Layout (little-endian): token u64, len u32, tag u32, check u64, then
 * len - 24 bytes generated from (token, tag).  check is an FNV-1a hash of
 * everything else.  A payload is fully determined by (token, tag, len), so a
 * read can be verified byte for byte against the commit that wrote it. */
#define PL_HDR 24u
void pl_make(void *buf, size_t len, uint64_t token, uint32_t tag);
/* 0 if buf[0..len) is a well-formed payload whose token equals fence; else a
 * short reason.  *tag receives the tag (may be NULL). */
const char *pl_check(const void *buf, size_t len, uint64_t fence, uint32_t *tag);
/* A deterministic length in [PL_HDR, max] for (token, tag). */
size_t pl_len(uint64_t token, uint32_t tag, size_t max);

/* ---- regions ---------------------------------------------------------------- */
/* A fresh region path under th_tmpdir() (static storage, one per call: 8 slots). */
const char *rc_path(const char *name);
/* Start fencelockd on a fresh region with extra options (NULL-terminated
 * list, may be NULL); aborts the test process if it does not get ready. */
void rc_daemon(th_daemon *d, const char *name, const char *const *extra);
/* fl_open or abort (for children: the parent sees the abort as a failure). */
fl_region *rc_open(const char *path);
/* Start a child with stdio flushed first (no buffered output is duplicated). */
void rc_child(th_child *c, th_child_fn fn, void *arg);
/* Read a line; abort with a message on timeout.  Returns buf. */
char *rc_recv(int fd, char *buf, size_t cap, int timeout_ms);
/* Exit status of a child that must exit 0 within timeout_ms (else -1 / status). */
int rc_child_exit(th_child *c, int timeout_ms);
/* Index of record `name` in r, or -1 (scans fl_record_info_get). */
int rc_record_index(fl_region *r, const char *name);
bool rc_record_info(fl_region *r, const char *name, fl_record_info *info);

/* ---- ptrace (tracer.h) ----------------------------------------------------- */
/* Step a traced child through a whole fl_commit (it must have raised SIGSTOP
 * right before it) and describe it.  is_published(ctx) tells whether the
 * commit has taken effect (the parent reads the record); it is asked after
 * every instruction until it says yes.  Fills: total instructions; the step
 * index and address of the instruction whose execution published (cas_step
 * -1 if none), and whether that instruction is a locked cmpxchg, as the
 * protocol says it must be (I2).  The child is detached afterwards.  0 or -1. */
typedef bool (*tr_published_fn)(void *ctx);
#define TR_NEAR_BEFORE 16
#define TR_NEAR_AFTER 8
typedef struct tr_profile {
    long total;
    long cas_step;
    uint64_t cas_rip;
    bool cas_locked;
    int cmpxchg_seen;
    /* The instructions executed from TR_NEAR_BEFORE before the publishing one
     * to TR_NEAR_AFTER after it: near_rip[i] ran at step cas_step - TR_NEAR_BEFORE
     * + i.  near_unique[i]: that address ran exactly once in the whole call, so
     * a breakpoint on it stops at that very point of another run through the
     * same code (single steps from the entry cannot: the length of the buffer
     * scan varies from run to run). */
    uint64_t near_rip[TR_NEAR_BEFORE + 1 + TR_NEAR_AFTER];
    bool near_unique[TR_NEAR_BEFORE + 1 + TR_NEAR_AFTER];
} tr_profile;
#define TR_NEAR_COUNT (TR_NEAR_BEFORE + 1 + TR_NEAR_AFTER)
int tr_profile_commit(pid_t pid, tr_published_fn is_published, void *ctx, tr_profile *out);

#endif
