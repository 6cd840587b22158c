/* SPDX-License-Identifier: MIT */
/*
 * backend.c - the shared-memory backend's ops table (backend.h): the
 * functions of slot.c, record.c, session.c, inspect.c and unreg.c, each
 * called with a handle this backend opened (a struct fl__shm, shm.h).
 */
#include "../backend.h"
#include "shm.h"

const struct fl__backend fl__shm_backend = {
    .name = "shm",
    .open = fl__shm_open,
    .close = fl__shm_close,
    .acquire = fl__shm_acquire,
    .key_resolve = fl__shm_key_resolve,
    .acquire_key = fl__shm_acquire_key,
    .renew = fl__shm_renew,
    .release = fl__shm_release,
    .check = fl__shm_check,
    .commit = fl__shm_commit,
    .commit_token = fl__shm_commit_token,
    .read = fl__shm_read,
    .registered = fl__shm_region_registered,
    .region_info = fl__shm_region_info_get,
    .lock_info = fl__shm_lock_info_get,
    .record_info = fl__shm_record_info_get,
    .client_info = fl__shm_client_info_get,
    .unregistered_info = fl__shm_unregistered_info_get,
};
