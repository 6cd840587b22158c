/* SPDX-License-Identifier: MIT */
/*
 * linz.h - the linearizability checker of fenced records and tokens
 * (issue 15): given a history of acquisitions, commits, reads and releases
 * with the invocation and response time of each, decide whether some order
 * of them, consistent with real time, explains every answer.  Used by the
 * etcd fault test (tests/etcd/etcd_linz.c) and by
 * `fl_chaos --check-history FILE`; tests/chaos/linz_checker.py feeds
 * it forged histories it must reject.  It knows nothing of the backend.
 *
 * HISTORY FORMAT (text, one operation a line, any order; # starts a comment)
 *   CLIENT OP INVOKED RESPONDED RESULT key=value...
 * CLIENT  a name; one client's operations never overlap (it is sequential)
 * OP      acquire | commit | read | release
 * INVOKED, RESPONDED  CLOCK_MONOTONIC nanoseconds of one host; RESPONDED is
 *         "-" when no answer came (the client died or hung): unknown outcome
 * RESULT  ok, an errno name (ESTALE, EAGAIN, EHOSTUNREACH, ENOENT, ...), or
 *         "-" with RESPONDED "-"
 * fields  acquire: key=K token=T (T when ok)
 *         commit:  key=K rec=R token=T strict=0|1 value=V [acc=F]
 *         read:    rec=R [value=V fence=F] (when ok)
 *         release: key=K token=T
 * Values are words, unique per record (the writer makes them so).
 *
 * WHAT A RESULT MEANS (docs/etcd.md, Errors)
 *   commit ok: accepted.  ESTALE: rejected, acc=F the record's accepted
 *   token.  EAGAIN, EPROTO, "-": unknown, it may have taken effect at any
 *   time after its invocation (even after its response: a request can sit
 *   in a stopped member).  EXDEV, EHOSTUNREACH and every other error: no
 *   effect.  Reads and acquisitions that failed say nothing.
 *
 * THE MODEL: each record is a register (value, fence F) with fencing: a
 * commit with token T takes effect iff the record is empty or T >= F
 * (strict: T > F), and then sets (value, T); otherwise it is rejected with
 * F; a read returns (value, F) or ENOENT.  Each key hands out tokens.
 *
 * RULES (each violation is named; counts per name are printed)
 *   token-duplicate     two acquisitions of a key returned the same token   I1
 *   token-order         acquisition X returned before Y was invoked, and
 *                       token(X) >= token(Y)                                I1
 *   release-late        a release returned ok although an acquisition of
 *                       its key with a greater token had returned before
 *                       the release was invoked
 *   commit-unissued     an accepted commit's token is no token its key
 *                       handed to an acquisition that returned before        I2
 *   commit-acc          an accepted commit reports acc != its token          I2
 *   commit-order        accepted commits A, B: A returned before B was
 *                       invoked, and token(A) > token(B) (= when B strict)   I2
 *   reject-wrong        a rejection whose acc is not above (strict: at
 *                       least) its token                                     I2
 *   reject-unwritten    a rejection names an acc no commit of the record
 *                       (accepted or unknown) carried                         I2
 *   read-unknown        a read value no commit of the record wrote           I3
 *   read-rejected       a read value of a rejected commit                    I2
 *   read-noeffect       a read value of a commit reported without effect
 *                       (EHOSTUNREACH, ...)                                   I2
 *   read-fence          a read's fence is not its value's commit's token     I3
 *   read-future         a read returned before its value's commit was invoked I3
 *   read-stale          a read invoked after a commit that must follow its
 *                       value's commit had returned (or ENOENT after an
 *                       accepted commit had returned)                        I3
 *   linearizability     no order of the accepted commits (and of the
 *                       unknown ones, each in or out) consistent with real
 *                       time explains every read and rejection (named:
 *                       the commit that cannot be placed and why)             I2 I3
 *   bad-history         a line that cannot be parsed, a repeated value
 *
 * HOW: a record's accepted commits must take effect in token order (a
 * commit below the fence is rejected), ties of one token (one lease, so one
 * client) in an order the search chooses (strict ones first); unknown
 * commits enter only where something saw them (a read of their value, a
 * rejection naming their token) or where they help.  With the write order
 * fixed, the history is linearizable iff the commits' points can be chosen
 * increasing inside their intervals, each before the response of every
 * read of its value and after the invocation of every read of the value
 * before it (a register with unique values, Gibbons and Korach): one pass
 * keeps the earliest feasible point, trying every order within a token.
 */
#ifndef FL_LINZ_H
#define FL_LINZ_H

#include <stdio.h>

typedef struct lz_history lz_history;

lz_history *lz_new(void);
void lz_free(lz_history *h);
/* Parse one line (a comment or blank line is fine); 0, or -1 for a bad line
 * (counted as bad-history by lz_check). */
int lz_add_line(lz_history *h, const char *line);
/* Add every line of a file; 0, or -1 if it cannot be read. */
int lz_load(lz_history *h, const char *path);
/* Check; prints violations (at most `show` per rule, 0: all) and a summary to
 * out; returns the number of violations. */
long lz_check(lz_history *h, FILE *out, int show);

#endif
