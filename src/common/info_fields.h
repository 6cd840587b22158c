/* SPDX-License-Identifier: MIT */
/*
 * info_fields.h - the fields of the inspection structures of fencelock.h
 * (fl_region_info, fl_lock_info, fl_record_info, fl_client_info), each
 * listed once, with everything the programs show of it.
 *
 * `fencelock status` draws its tables (the -o columns and their --help)
 * and its --json members from these lists, its --watch view takes its lock
 * and record columns from them, and the Prometheus writer (`fencelock
 * metrics`, fencelockd --metrics-file) its families.  A new field of
 * fl_lock_info is one entry in FL_LOCK_INFO_FIELDS; the test
 * cli_info_fields fails until every field of the header has one.  (The
 * library fills the structures from the region's own layout and names, in
 * src/shm/slot.c, src/shm/record.c and src/shm/inspect.c: not from these lists.)
 *
 * Each list is an X-macro, in the order of the JSON members, which is also
 * the order of the -o columns, of --output-all and of the metric families:
 *
 *   FL_LOCK_INFO_FIELDS(X), FL_RECORD_INFO_FIELDS(X), FL_CLIENT_INFO_FIELDS(X)
 *       X(field, format, column, json, flags, help, metric_type, metric, metric_help)
 *   FL_REGION_INFO_FIELDS(X, V)
 *       X(field, format, json, metric_type, metric, metric_help)
 *       V(name)  a member of the JSON "region" object that is no field of
 *                fl_region_info (the path, a count of the snapshot, a
 *                constant, a field written another way): `fencelock status`
 *                gives its value; here is only its place
 *
 *   field        the member of the structure
 *   format       how it reads and shows: NUM, TEXT, ... (enum fl_info_format
 *                below, without its FL_INFO_ prefix)
 *   column       the table's header, and the name -o takes
 *   json         the member of --json
 *   flags        FL_INFO_DEFAULT for a column shown without -o, else 0
 *   help         what the column means (--help, --list-columns)
 *   metric_type  COUNTER, GAUGE, or NONE for a field that is no metric
 *   metric       the family's name after "fencelock_" (NULL for NONE)
 *   metric_help  its HELP line (NULL for NONE)
 *
 * A consumer defines X (and V) to take what it needs and ignores the rest:
 * arguments it does not use are never compiled.
 */
#ifndef FL_COMMON_INFO_FIELDS_H
#define FL_COMMON_INFO_FIELDS_H

/* How a field reads and shows.  The JSON type follows from it, and so does
 * a table's alignment: numbers right, words and text left. */
enum fl_info_format {
    FL_INFO_NUM,          /* an unsigned number */
    FL_INFO_FLAG,         /* 0 or 1: JSON true or false, yes or no, a 0 or 1 sample */
    FL_INFO_TEXT,         /* a char array: a JSON string; escaped (\xNN) in a table */
    FL_INFO_TEXT_OR_NULL, /* the same, "" being JSON null and - in a table */
    FL_INFO_LOCK_STATE,   /* FL_LOCK_*: free, held, expired; as a sample, 1 while held */
    FL_INFO_RUN_STATE,    /* FL_RUN_* read with served: never_served, running,
                             unclean_shutdown, clean_shutdown */
    FL_INFO_OP,           /* FL_OP_*: commit, strict_commit, renew, release; null (-) for 0 */
    FL_INFO_RELEASE,      /* how the last holding ended: released, died, voided; null (-)
                             while held or if never held */
    FL_INFO_ATTACHED,     /* attached (1) or adopted (0) */
    FL_INFO_LEFT,         /* signed nanoseconds of lease left: a JSON number; 1.25s,
                             expired or - in a table */
    FL_INFO_NUM_HELD,     /* a lock's number, - in a table while the key is free */
    FL_INFO_NUM_HOLDER,   /* a lock's number, - while free or held by an unregistered client */
    FL_INFO_NUM_STALE,    /* a lock's number, - until a renew or release was refused as stale */
    FL_INFO_NUM_REJECTED, /* a record's number, - until it rejected a commit */
};

/* flags */
#define FL_INFO_DEFAULT 1u /* a column shown without -o */

#define FL_REGION_INFO_FIELDS(X, V)                                                                \
    V(path)                                                                                        \
    X(format_version, NUM, "format_version", NONE, NULL, NULL)                                     \
    X(file_size, NUM, "file_size", NONE, NULL, NULL)                                               \
    X(lock_capacity, NUM, "lock_capacity", GAUGE, "lock_capacity", "Lock slots the region holds.") \
    X(locks_used, NUM, "locks_used", GAUGE, "locks_used", "Lock slots (keys) in use.")             \
    X(record_capacity, NUM, "record_capacity", GAUGE, "record_capacity",                           \
      "Records the region holds.")                                                                 \
    X(records_used, NUM, "records_used", GAUGE, "records_used", "Records in use.")                 \
    X(record_size, NUM, "record_size", NONE, NULL, NULL)                                           \
    X(buffer_count, NUM, "buffer_count", NONE, NULL, NULL)                                         \
    X(client_capacity, NUM, "client_capacity", NONE, NULL, NULL)                                   \
    V(clients_used)                                                                                \
    X(token_floor, NUM, "token_floor", GAUGE, "token_floor", "Every new token is at least this.")  \
    X(epoch, NUM, "epoch", GAUGE, "epoch",                                                         \
      "Current token epoch (tokens are epoch << 40 | counter).")                                   \
    V(token_epoch_shift)                                                                           \
    X(supervisor_pid, NUM, "supervisor_pid", NONE, NULL, NULL)                                     \
    X(served, FLAG, "supervisor_alive", GAUGE, "supervisor_up",                                    \
      "1 if a fencelockd serves the region.")                                                      \
    X(run_state, RUN_STATE, "last_run", NONE, NULL, NULL)                                          \
    X(started_unix_ns, NUM, "started_unix_ns", NONE, NULL, NULL)                                   \
    X(clean_unix_ns, NUM, "clean_unix_ns", NONE, NULL, NULL)                                       \
    X(boot_id, TEXT, "boot_id", NONE, NULL, NULL)                                                  \
    X(same_boot, FLAG, "same_boot", NONE, NULL, NULL)                                              \
    X(ready, FLAG, "ready", NONE, NULL, NULL)                                                      \
    X(records_unvouched, NUM, "records_unvouched", NONE, NULL, NULL)                               \
    X(clients_refused, NUM, "clients_refused", NONE, NULL, NULL)                                   \
    X(created_unix_ns, NUM, "created_unix_ns", NONE, NULL, NULL)                                   \
    V(created)                                                                                     \
    X(events_dropped, NUM, "events_dropped", COUNTER, "events_dropped_total",                      \
      "Events the supervisor log never showed (ring full or a stopped client).")

#define FL_CLIENT_INFO_FIELDS(X)                                                                   \
    X(index, NUM, "INDEX", "index", FL_INFO_DEFAULT,                                               \
      "client table index (what the locks table shows as CLIENT)", NONE, NULL, NULL)               \
    X(client_id, NUM, "CLIENT-ID", "client_id", FL_INFO_DEFAULT,                                   \
      "client id, unique for the life of the region", NONE, NULL, NULL)                            \
    X(pid, NUM, "PID", "pid", FL_INFO_DEFAULT, "the client's process id", NONE, NULL, NULL)        \
    X(uid, NUM, "UID", "uid", FL_INFO_DEFAULT, "the client's user id", NONE, NULL, NULL)           \
    X(attached, ATTACHED, "STATE", "state", FL_INFO_DEFAULT,                                       \
      "attached (connected to the running supervisor) or adopted (registered before a "            \
      "supervisor restart, watched by pid)",                                                       \
      NONE, NULL, NULL)

#define FL_LOCK_INFO_FIELDS(X)                                                                     \
    X(key, TEXT, "KEY", "key", FL_INFO_DEFAULT,                                                    \
      "the key; bytes outside printable ASCII are shown as \\xNN and a backslash as \\\\",         \
      NONE, NULL, NULL)                                                                            \
    X(state, LOCK_STATE, "STATE", "state", FL_INFO_DEFAULT,                                        \
      "free; held (by an unexpired lease); expired (the lease ended while held: the next "         \
      "acquire takes it over with a new token)",                                                   \
      GAUGE, "lock_held", "1 while an unexpired lease holds the key.")                             \
    X(token, NUM, "TOKEN", "token", FL_INFO_DEFAULT,                                               \
      "latest fencing token handed out for the key (0: never)",                                    \
      GAUGE, "lock_token", "Latest fencing token handed out for the key.")                         \
    X(holder_pid, NUM_HELD, "PID", "holder_pid", FL_INFO_DEFAULT,                                  \
      "holder's process id, - when free (JSON: the latest holder's, also after a release)",        \
      NONE, NULL, NULL)                                                                            \
    X(holder_client, NUM_HOLDER, "CLIENT", "holder_client", FL_INFO_DEFAULT,                       \
      "holder's client index; - when free or when the holder is not registered (then its "         \
      "death is detected only by lease expiry)",                                                   \
      NONE, NULL, NULL)                                                                            \
    X(holder_client_id, NUM_HOLDER, "CLIENT-ID", "holder_client_id", 0,                            \
      "holder's client id, - like CLIENT", NONE, NULL, NULL)                                       \
    X(lease_left_ns, LEFT, "LEFT", "lease_left_ns", FL_INFO_DEFAULT,                               \
      "lease time left (300ms, 1.25s, 4m05s); expired once past its deadline; - when free "        \
      "(JSON: nanoseconds, negative once expired, 0 when free)",                                   \
      NONE, NULL, NULL)                                                                            \
    X(waiters, NUM, "WAITERS", "waiters", FL_INFO_DEFAULT, "processes waiting for the key now",    \
      GAUGE, "lock_waiters", "Processes waiting for the key.")                                     \
    X(acquisitions, NUM, "ACQUIRED", "acquisitions", FL_INFO_DEFAULT, "successful acquisitions",   \
      COUNTER, "lock_acquisitions_total", "Successful acquisitions of the key.")                   \
    X(contended, NUM, "CONTENDED", "contended", FL_INFO_DEFAULT,                                   \
      "acquisitions that found the key held",                                                      \
      COUNTER, "lock_contended_total", "Acquisitions that found the key held.")                    \
    X(expiries_taken, NUM, "TAKEOVERS", "expiries_taken", FL_INFO_DEFAULT,                         \
      "acquisitions that took an expired lease over",                                              \
      COUNTER, "lock_expiries_taken_total",                                                        \
      "Acquisitions that took over a lease whose holder let it expire.")                           \
    X(deaths, NUM, "DEATHS", "deaths", FL_INFO_DEFAULT,                                            \
      "holdings released by fencelockd because the holder died",                                   \
      COUNTER, "lock_deaths_total",                                                                \
      "Holdings released by the supervisor because the holder died.")                              \
    X(renewals, NUM, "RENEWALS", "renewals", FL_INFO_DEFAULT, "successful lease renewals",         \
      COUNTER, "lock_renewals_total", "Successful lease renewals.")                                \
    X(renew_failed, NUM, "RENEW-STALE", "renew_failed", 0, "renewals refused as stale",            \
      COUNTER, "lock_renew_failed_total", "Renewals refused: ownership was lost.")                 \
    X(releases, NUM, "RELEASES", "releases", 0, "successful releases",                             \
      COUNTER, "lock_releases_total", "Releases.")                                                 \
    X(release_failed, NUM, "RELEASE-STALE", "release_failed", 0, "releases refused as stale",      \
      COUNTER, "lock_release_failed_total", "Releases refused as stale.")                          \
    X(busy, NUM, "BUSY", "busy", 0,                                                                \
      "tries without waiting (timeout 0) that found the key held (EBUSY)",                         \
      COUNTER, "lock_busy_total", "Tries that found the key held (EBUSY).")                        \
    X(timeouts, NUM, "TIMEOUTS", "timeouts", 0,                                                    \
      "waits that ended with the key still held (ETIMEDOUT)",                                      \
      COUNTER, "lock_timeouts_total", "Waits that ended with the key still held (ETIMEDOUT).")     \
    X(last_release, RELEASE, "LAST", "last_release", FL_INFO_DEFAULT,                              \
      "how the last holding ended: released; died (released by fencelockd); voided (a lease "      \
      "of an earlier boot); - while held or if never held",                                        \
      NONE, NULL, NULL)                                                                            \
    X(last_stale_token, NUM_STALE, "STALE-TOKEN", "last_stale_token", 0,                           \
      "token of the last renewal or release refused as stale, - if none", NONE, NULL, NULL)        \
    X(last_stale_pid, NUM_STALE, "STALE-PID", "last_stale_pid", 0,                                 \
      "process that made it, - if none", NONE, NULL, NULL)                                         \
    X(last_stale_op, OP, "STALE-OP", "last_stale_op", 0, "renew or release, - if none",            \
      NONE, NULL, NULL)

#define FL_RECORD_INFO_FIELDS(X)                                                                   \
    X(name, TEXT, "NAME", "name", FL_INFO_DEFAULT, "record name, escaped like keys",               \
      NONE, NULL, NULL)                                                                            \
    X(bound_key, TEXT_OR_NULL, "KEY", "bound_key", FL_INFO_DEFAULT,                                \
      "the lock key that fences it (- if never bound)", NONE, NULL, NULL)                          \
    X(accepted_token, NUM, "TOKEN", "accepted_token", FL_INFO_DEFAULT,                             \
      "greatest fencing token the record accepted (0: none)",                                      \
      GAUGE, "record_accepted_token", "Greatest token the record accepted.")                       \
    X(version, NUM, "VERSION", "version", FL_INFO_DEFAULT,                                         \
      "version of the current value (accepted commits)",                                           \
      GAUGE, "record_version", "Number of accepted commits (the value's version).")                \
    X(size, NUM, "SIZE", "size", FL_INFO_DEFAULT, "bytes in the current value",                    \
      NONE, NULL, NULL)                                                                            \
    X(commits, NUM, "COMMITS", "commits", FL_INFO_DEFAULT, "commits accepted",                     \
      COUNTER, "record_commits_total", "Commits the record accepted.")                             \
    X(rejections, NUM, "REJECTED", "rejections", FL_INFO_DEFAULT,                                  \
      "commits rejected for a stale token",                                                        \
      COUNTER, "record_rejections_total",                                                          \
      "Commits refused because the record had accepted a newer token.")                            \
    X(last_rejected_token, NUM_REJECTED, "REJ-TOKEN", "last_rejected_token", FL_INFO_DEFAULT,      \
      "token of the last rejected commit, - if none",                                              \
      GAUGE, "record_last_rejected_token", "Token of the last rejected commit.")                   \
    X(last_rejected_pid, NUM_REJECTED, "REJ-PID", "last_rejected_pid", FL_INFO_DEFAULT,            \
      "process that made the last rejected commit, - if none", NONE, NULL, NULL)                   \
    X(last_rejected_accepted, NUM_REJECTED, "REJ-ACCEPTED", "last_rejected_accepted", 0,           \
      "the token the record had accepted when it rejected that commit, - if none",                 \
      NONE, NULL, NULL)                                                                            \
    X(last_rejected_op, OP, "REJ-OP", "last_rejected_op", 0,                                       \
      "commit or strict_commit, - if none", NONE, NULL, NULL)                                      \
    X(repeats, NUM, "REPEATS", "repeats", 0,                                                       \
      "rejections of a token among the record's last 4 rejected tokens (a client retrying "        \
      "a stale token instead of acquiring again)",                                                 \
      COUNTER, "record_repeats_total",                                                             \
      "Rejections of a token already rejected on the record: a retry loop.")                       \
    X(unvouched, FLAG, "UNVOUCHED", "unvouched", 0,                                                \
      "yes if fencelockd could not vouch for the value at its start: reads fail (EBADMSG) "        \
      "until the next commit",                                                                     \
      NONE, NULL, NULL)

#endif
